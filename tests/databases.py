"""Databases for the tests that run on SQLite and on PostgreSQL alike."""

from __future__ import annotations

import uuid

import pytest

from ragmon.monitor.storage.store import make_engine, upgrade

#: the ``params`` of a fixture that gives such a test both databases (PostgreSQL: an integration test)
BOTH = ["sqlite", pytest.param("postgresql", marks=pytest.mark.integration)]


def migrated_url(request: pytest.FixtureRequest, tmp_path, name: str) -> str:
    """A database at the code's schema for ``request.param`` (see :data:`BOTH`): a file in
    ``tmp_path``, or a database of its own on the session's PostgreSQL, ``name`` plus a random part."""
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path / 'ragmon.db'}"
    else:
        url = request.getfixturevalue("postgres").create_database(f"{name}_{uuid.uuid4().hex[:8]}")
    engine = make_engine(url)
    upgrade(engine)
    engine.dispose()
    return url
