"""unread_trace: the OTLP traces ragmon could not read, or read without a caller or a context

Revision ID: 0012
Revises: 0011

One row per such trace (monitor/storage/unread_store.py): its shown trace id, tenant and
instrumentation scope, what it lacked, the closest dialect, and a bounded, redacted digest of its
spans (names, kinds, attribute keys; no value), kept for ``otlp.unread_retention_days``. ``key``
makes a trace assembled twice store one row.
"""

import sqlalchemy as sa
from alembic import op

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None

# additive: a new table; the code of the revision before runs on this schema (docs/upgrades.md)
change = "expand"


def upgrade() -> None:
    op.create_table(
        "unread_trace",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("key", sa.String(64), nullable=False, unique=True),
        sa.Column("trace_id", sa.String(256), nullable=False),
        sa.Column("time", sa.Float, nullable=False),
        sa.Column("recorded_at", sa.Float, nullable=False),
        sa.Column("tenant", sa.String(256), nullable=False),
        sa.Column("scope", sa.String(256), nullable=False),
        sa.Column("missing", sa.String(16), nullable=False),
        sa.Column("dialect", sa.String(32), nullable=False),
        sa.Column("lacked", sa.Text, nullable=False),
        sa.Column("spans", sa.Integer, nullable=False),
        sa.Column("digest", sa.JSON, nullable=False),
    )
    op.create_index("ix_unread_trace_recorded_at", "unread_trace", ["recorded_at"])
    op.create_index("ix_unread_trace_scope", "unread_trace", ["scope"])


def downgrade() -> None:
    op.drop_index("ix_unread_trace_scope", "unread_trace")
    op.drop_index("ix_unread_trace_recorded_at", "unread_trace")
    op.drop_table("unread_trace")
