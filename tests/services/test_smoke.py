"""Each real service is real: used the way the product will use it."""

from __future__ import annotations

import time
import uuid
from pathlib import Path

import pytest
from sqlmodel import Field, Session, SQLModel, create_engine, select

pytestmark = pytest.mark.integration


def test_kafka_produces_and_consumes(kafka):
    from kafka import KafkaConsumer, KafkaProducer
    from kafka.admin import KafkaAdminClient, NewTopic

    from ragmon.collectors.kafka_calls import kafka_call

    topic = f"smoke-{uuid.uuid4().hex[:8]}"

    def create() -> None:
        admin = KafkaAdminClient(bootstrap_servers=kafka.bootstrap_servers)
        try:
            admin.create_topics([NewTopic(topic, num_partitions=3, replication_factor=1)])
        finally:
            admin.close()

    kafka_call(create, f"creating topic {topic}")
    producer = KafkaProducer(bootstrap_servers=kafka.bootstrap_servers, acks="all")
    sent = [f"message-{i}".encode() for i in range(30)]
    for i, value in enumerate(sent):
        producer.send(topic, key=str(i % 5).encode(), value=value)
    producer.flush()
    producer.close()
    consumer = KafkaConsumer(topic, bootstrap_servers=kafka.bootstrap_servers, group_id="smoke",
                             auto_offset_reset="earliest", enable_auto_commit=False, consumer_timeout_ms=10_000)
    received = []
    for message in consumer:
        received.append(message.value)
        if len(received) == len(sent):
            break
    consumer.commit()
    consumer.close()
    assert sorted(received) == sorted(sent)


class SmokeRow(SQLModel, table=True):
    __tablename__ = "smoke_row"
    id: int | None = Field(default=None, primary_key=True)
    name: str
    score: float


def _write_and_read(url: str) -> list[tuple[str, float]]:
    engine = create_engine(url)
    SQLModel.metadata.create_all(engine, tables=[SmokeRow.__table__])
    with Session(engine) as session:
        session.add_all([SmokeRow(name="a", score=0.5), SmokeRow(name="b", score=0.25)])
        session.commit()
    with Session(engine) as session:
        rows = [(r.name, r.score) for r in session.exec(select(SmokeRow).order_by(SmokeRow.name))]
    engine.dispose()
    return rows


def test_sqlmodel_on_postgresql(postgres):
    url = postgres.create_database(f"smoke_{uuid.uuid4().hex[:8]}")
    assert _write_and_read(url) == [("a", 0.5), ("b", 0.25)]
    engine = create_engine(url)
    with engine.connect() as connection:
        assert connection.exec_driver_sql("select version()").scalar().startswith("PostgreSQL")
    engine.dispose()


def test_sqlmodel_on_sqlite(tmp_path: Path):
    assert _write_and_read(f"sqlite:///{tmp_path / 'smoke.db'}") == [("a", 0.5), ("b", 0.25)]


def test_promtool_checks_a_generated_config_and_prometheus_answers(prometheus):
    prometheus.write_config(targets=["127.0.0.1:1"], interval="1s")
    assert "SUCCESS" in prometheus.check_config()
    prometheus.reload()

    deadline = time.monotonic() + 20
    jobs: set[str] = set()
    while time.monotonic() < deadline and jobs != {"prometheus", "ragmon"}:
        jobs = {series["metric"]["job"] for series in prometheus.query("up")}
        time.sleep(0.5)
    assert jobs == {"prometheus", "ragmon"}
    down = prometheus.query('up{job="ragmon"}')
    assert down[0]["value"][1] == "0"  # nothing listens on port 1: a real scrape, really failing


def test_alertmanager_status(alertmanager):
    status = alertmanager.status()
    assert status["cluster"]["status"] == "disabled"
    assert status["versionInfo"]["version"]
    assert "route" in status["config"]["original"]
