"""Session-wide fixtures for the real services, started on first use and stopped at the end,
and how `make test` shares the tests between its pytest-xdist workers.

In CI (``CI`` set) a skipped test fails the run: an integration test that did not run has not
passed.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator

import pytest

from tests.services.harness import Alertmanager, Kafka, LabelStudio, Postgres, Prometheus

# pytest caches each test module's assert-rewritten code beside it (__pycache__/*-pytest-*.pyc),
# but not where PYTHONDONTWRITEBYTECODE is set (as on the development machine): every pytest
# process then parsed, rewrote and compiled every test module anew, 10 s of CPU of the 15 s a
# collection of the suite takes, in each of `make test`'s workers. The flag is cleared in this
# process only (its subprocesses keep the environment); the rewrite checks it as each module loads.
sys.dont_write_bytecode = False


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


# Tests that fill a core on their own (a second process makes their input, or the code under test
# fills it), in two groups of about the same length (`cpu-bound-otlp`, `cpu-bound-pipeline`): two
# workers start with one each, so that the longest of them all (the OTLP fuzz) starts at once and
# the others do not queue behind it; the tests that mostly wait (on brokers, timeouts,
# subprocesses) fill in around them, on the third worker first.
CPU_BOUND = "cpu-bound"  # the prefix of those groups' names
# Modules that share one instance of a slow-starting service: one worker starts it once.
SHARED = {"tests/exporters/test_label_studio.py": "label-studio", "tests/test_labeling_loop.py": "label-studio",
          "tests/test_redaction_exports.py": "label-studio", "tests/test_follow_up_eval.py": "label-studio"}


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Group the tests for ``--dist loadgroup``: a module's tests stay together (their module
    fixtures, and the order some rely on), unless marked ``xdist_group`` (the ``CPU_BOUND`` groups); the
    groups with slow tests come first, so they start at once and the short ones fill in."""
    def group(item: pytest.Item) -> str:
        marked = item.get_closest_marker("xdist_group")
        if marked is not None:
            return marked.args[0] if marked.args else marked.kwargs["name"]
        module = item.nodeid.split("::", 1)[0]
        return SHARED.get(module, module)

    for item in items:
        if item.get_closest_marker("xdist_group") is None:
            item.add_marker(pytest.mark.xdist_group(group(item)))
    slow = {group(item) for item in items if item.get_closest_marker("slow")}
    # In the CPU-bound group the slow tests go first too: a worker is sent its next group once it
    # has two tests left, and that group then waits behind them.
    def cpu_bound(item: pytest.Item) -> bool:
        return group(item).startswith(CPU_BOUND)

    items.sort(key=lambda item: (not cpu_bound(item), group(item) not in slow,
                                 cpu_bound(item) and item.get_closest_marker("slow") is None))


@pytest.hookimpl(optionalhook=True)  # an xdist hook: absent with -p no:xdist
def pytest_xdist_node_collection_finished(node, ids: list[str]) -> None:
    """Under ``--dist loadgroup``, refuse to run when the groups did not reach the node ids a
    worker collected (xdist carries them there): every test would be scheduled on its own, the
    shared services started once per worker and the CPU-bound tests run side by side."""
    lost = [nodeid for nodeid in ids if "@" not in nodeid]
    if node.config.getvalue("dist") == "loadgroup" and lost:
        pytest.exit(f"--dist loadgroup: {len(lost)} test(s) lost their xdist group (first: {lost[0]}); this "
                    "pytest and pytest-xdist do not work together (see the pin in pyproject.toml)", returncode=4)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    skipped = len(reporter.stats.get("skipped", [])) if reporter else 0
    if os.environ.get("CI") and skipped and exitstatus == 0:
        reporter.write_line(f"CI: {skipped} test(s) skipped; a skipped test fails the run", red=True)
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
