# The ragmon image the Helm chart runs: `ragmon` as the entrypoint, a non-root user, nothing
# written outside /data and /tmp (the chart mounts both; the root filesystem stays read-only).
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
WORKDIR /data
USER 10001
EXPOSE 4318
ENTRYPOINT ["ragmon"]
CMD ["serve"]
