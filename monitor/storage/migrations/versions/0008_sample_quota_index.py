"""sample: the weekly quota's columns of a tenant-week in one index (SQLite)

Revision ID: 0008
Revises: 0007

Each batch reads the trace id, strata, status and rank of every sample of its tenant-weeks: the
quota is decided against them. SQLite stores a row's columns in order, and ``rank`` comes after
``payload`` (the redacted trace, kilobytes, spilling into overflow pages), so each row read walked
its payload's pages: a cost growing with the week's samples, paid on every batch. An index holding
those columns answers the query alone. PostgreSQL keeps large values out of line (TOAST) and reads
the other columns without touching them, so the index is SQLite's only.
"""

from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None
# additive: the code of the revision before runs on this schema (docs/upgrades.md)
change = "expand"

_COLUMNS = ["week", "tenant", "trace_id", "strata", "status", "rank"]


def upgrade() -> None:
    if op.get_bind().dialect.name == "sqlite":
        op.create_index("ix_sample_week_quota", "sample", _COLUMNS)


def downgrade() -> None:
    if op.get_bind().dialect.name == "sqlite":
        op.drop_index("ix_sample_week_quota", "sample")
