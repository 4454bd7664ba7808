"""Which code may run on which schema: expand and contract migrations (docs/upgrades.md).

Every migration script declares what it does to code that is older than it:

- ``change = "expand"``: additive (a table, a nullable column or one with a server default, an
  index). The code of the revision before it keeps working on the new schema, so a pod of the
  previous release that restarts during a rollout, or after a rollback, still starts.
- ``change = "contract"`` with ``needs_code = "<revision>"``: destructive (a column or table dropped
  or renamed, a constraint the old code would break). Only code whose head is ``needs_code`` or
  later runs on it; ``needs_code`` is an earlier revision, the one whose code stopped using what
  this revision takes away (a release before).

The code that upgrades a database knows every revision up to its head, so it writes in the database
(table ``schema_window``, migration 0010) the oldest code head the schema admits. Code that finds the
database at a revision it has never seen reads that row to decide: any number of newer expand
revisions are accepted, a contract revision it does not know is refused with what to run instead.
"""

from __future__ import annotations

from dataclasses import dataclass

import sqlalchemy as sa
from alembic.script import ScriptDirectory
from sqlalchemy.engine import Connection

TABLE = "schema_window"
CHANGES = ("expand", "contract")

_window = sa.table(TABLE, sa.column("revision", sa.String), sa.column("oldest_code", sa.String),
                   sa.column("written_by", sa.String))


class SchemaOutdated(Exception):
    """The database schema is behind the code; run ``ragmon db upgrade``."""


class SchemaTooNew(SchemaOutdated):
    """The database schema is ahead of the code by a step this code cannot run on."""


class MigrationDeclarationError(Exception):
    """A migration script does not say whether it is an expand or a contract step (a bug of the release)."""


@dataclass(frozen=True)
class Window:
    """What ``schema_window`` says: the schema's revision, the oldest code head that runs on it
    (None: any code that reads this table), and the ragmon version that wrote it."""

    revision: str
    oldest_code: str | None
    written_by: str


def chain(script: ScriptDirectory) -> list[str]:
    """The code's revisions, oldest first."""
    return [revision.revision for revision in reversed(list(script.walk_revisions()))]


def declared(script: ScriptDirectory, revision: str) -> tuple[str, str | None]:
    """``(change, needs_code)`` of ``revision``, checked: a change of :data:`CHANGES`, and for a
    contract step an earlier revision as ``needs_code``."""
    module = script.get_revision(revision).module
    change = getattr(module, "change", None)
    needs_code = getattr(module, "needs_code", None)
    if change not in CHANGES:
        raise MigrationDeclarationError(f"migration {revision}: declares change = {change!r}, not 'expand' or "
                                        "'contract' (docs/upgrades.md)")
    revisions = chain(script)
    if change == "contract" and (needs_code not in revisions or revisions.index(needs_code) >= revisions.index(
            revision)):
        raise MigrationDeclarationError(f"migration {revision}: a contract step names the oldest code it runs "
                                        f"with as needs_code, an earlier revision; it says {needs_code!r}")
    if change == "expand" and needs_code is not None:
        raise MigrationDeclarationError(f"migration {revision}: an expand step runs with older code; it cannot "
                                        "name needs_code")
    return change, needs_code


def oldest_code(script: ScriptDirectory, revision: str) -> str | None:
    """The oldest code head that runs on the schema at ``revision``: the latest ``needs_code`` of
    the contract steps up to it (None when there is none)."""
    revisions = chain(script)
    oldest = None
    for step in revisions[:revisions.index(revision) + 1]:
        _, needs_code = declared(script, step)
        if needs_code is not None and (oldest is None or revisions.index(needs_code) > revisions.index(oldest)):
            oldest = needs_code
    return oldest


def record(connection: Connection, script: ScriptDirectory, revision: str | None, version: str) -> None:
    """Write the window of the schema at ``revision`` (after an upgrade or a downgrade); nothing
    when the schema is older than the table."""
    if revision is None or not sa.inspect(connection).has_table(TABLE):
        return
    window = Window(revision, oldest_code(script, revision), version)
    if read(connection) == window:
        return  # the same row: an idle start-up of embedded SQLite writes nothing
    connection.execute(_window.delete())
    connection.execute(_window.insert().values(revision=window.revision, oldest_code=window.oldest_code,
                                               written_by=window.written_by))


def read(connection: Connection) -> Window | None:
    """The recorded window, or None when the table is missing or empty."""
    if not sa.inspect(connection).has_table(TABLE):
        return None
    row = connection.execute(sa.select(_window.c.revision, _window.c.oldest_code, _window.c.written_by)).first()
    return Window(*row) if row is not None else None


def check(connection: Connection, script: ScriptDirectory, current: str | None) -> str:
    """Whether this code (``script``'s head) runs on the schema at ``current``: ``"current"`` when
    it is the head, ``"behind"`` when it is older (an upgrade is due), ``"ahead"`` when it is newer
    by expand steps only; else :class:`SchemaTooNew` says why and what to run."""
    revisions = chain(script)
    head = revisions[-1]
    if current == head:
        return "current"
    if current is None or current in revisions:
        return "behind"
    window = read(connection)
    if window is None or window.revision != current:
        raise SchemaTooNew(
            f"database schema is at {current}, newer than this code ({head}) and without a schema window this code "
            "can read: run the release that migrated it, or `ragmon db downgrade` with that release's code")
    if window.oldest_code is not None and (window.oldest_code not in revisions
                                           or revisions.index(window.oldest_code) > revisions.index(head)):
        raise SchemaTooNew(
            f"database schema is at {current} (migrated by ragmon {window.written_by}): a contract step after this "
            f"code's {head} needs code at revision {window.oldest_code} or later; run that release "
            f"(CHANGELOG.md), or `ragmon db downgrade {head}` with ragmon {window.written_by}'s code if every step "
            "back can go")
    return "ahead"
