# The ragmon image the Helm chart runs: `ragmon` as the entrypoint, a non-root user, nothing
# written outside /data and /tmp (declared volumes; the root filesystem can be read-only).
# It listens on 0.0.0.0, so `serve` refuses to start without an ingest token:
#   docker run --read-only -e RAGMON_HTTP__TOKEN=... -p 4318:4318 ragmon
FROM python:3.11-slim
RUN useradd --uid 10001 --user-group --no-create-home ragmon \
 && mkdir /data && chown ragmon:ragmon /data
WORKDIR /src
COPY pyproject.toml README.md ./
COPY ragmon ragmon
COPY monitor monitor
COPY collectors collectors
COPY exporters exporters
COPY alerts alerts
RUN pip install --no-cache-dir '.[server,postgres]' && rm -rf /src
ENV RAGMON_HTTP__HOST=0.0.0.0 \
    PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1
WORKDIR /data
VOLUME ["/data", "/tmp"]
USER 10001
EXPOSE 4318
HEALTHCHECK --interval=30s --timeout=5s --start-period=120s --retries=3 CMD ["ragmon", "healthcheck"]
ENTRYPOINT ["ragmon"]
CMD ["serve"]
