"""Session-wide fixtures for the real services, started on first use and stopped at the end.

In CI (``CI`` set) a skipped test fails the run: an integration test that did not run has not
passed.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from tests.services.harness import Alertmanager, Kafka, LabelStudio, Postgres, Prometheus


@pytest.fixture(scope="session")
def kafka() -> Iterator[Kafka]:
    with Kafka() as service:
        yield service


@pytest.fixture(scope="session")
def postgres() -> Iterator[Postgres]:
    with Postgres() as service:
        yield service


@pytest.fixture(scope="session")
def prometheus() -> Iterator[Prometheus]:
    with Prometheus() as service:
        yield service


@pytest.fixture(scope="session")
def alertmanager() -> Iterator[Alertmanager]:
    with Alertmanager() as service:
        yield service


@pytest.fixture(scope="session")
def label_studio() -> Iterator[LabelStudio]:
    with LabelStudio() as service:
        yield service


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    skipped = len(reporter.stats.get("skipped", [])) if reporter else 0
    if os.environ.get("CI") and skipped and exitstatus == 0:
        reporter.write_line(f"CI: {skipped} test(s) skipped; a skipped test fails the run", red=True)
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
