"""findings: which passages of which trace broke which rule, in words

Revision ID: 0005
Revises: 0004

One row per rule that fired on a trace (monitor/findings/store.py), ids and words only, kept for
``findings.retention_days``. ``key`` makes a retried batch or a redelivery store a row once.
"""

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None
# additive: the code of the revision before runs on this schema (docs/upgrades.md)
change = "expand"


def upgrade() -> None:
    op.create_table(
        "finding",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("key", sa.String(64), nullable=False, unique=True),
        sa.Column("trace_id", sa.String(256), nullable=False),
        sa.Column("time", sa.Float, nullable=False),
        sa.Column("recorded_at", sa.Float, nullable=False),
        sa.Column("tenant", sa.String(256), nullable=False),
        sa.Column("index_name", sa.String(256), nullable=False),
        sa.Column("caller", sa.String(64), nullable=False),
        sa.Column("signal", sa.String(32), nullable=False),
        sa.Column("stage", sa.String(16), nullable=True),
        sa.Column("passage_ids", sa.JSON, nullable=False),
        sa.Column("documents", sa.JSON, nullable=False),
        sa.Column("reason", sa.Text, nullable=False),
    )
    op.create_index("ix_finding_trace_id", "finding", ["trace_id"])
    op.create_index("ix_finding_recorded_at", "finding", ["recorded_at"])
    op.create_index("ix_finding_signal", "finding", ["signal"])


def downgrade() -> None:
    op.drop_index("ix_finding_signal", "finding")
    op.drop_index("ix_finding_recorded_at", "finding")
    op.drop_index("ix_finding_trace_id", "finding")
    op.drop_table("finding")
