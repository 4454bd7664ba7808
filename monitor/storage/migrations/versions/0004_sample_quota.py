"""samples: the rank that orders the weekly quota, and the near-duplicate claims per stratum

Revision ID: 0004
Revises: 0003

The weekly quota is decided in the database, under a lock per tenant-week, so that replicas sharing
it decide as one process (monitor/labeling/quota.py). Samples stored before this revision get rank 0:
they keep their places.
"""

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None
# additive: the code of the revision before runs on this schema (docs/upgrades.md)
change = "expand"


def upgrade() -> None:
    op.add_column("sample", sa.Column("rank", sa.Float, nullable=False, server_default="0"))
    op.create_table(
        "sample_claim",
        sa.Column("tenant", sa.String(256), primary_key=True),
        sa.Column("week", sa.String(8), primary_key=True),
        sa.Column("stratum", sa.String(32), primary_key=True),
        sa.Column("fingerprint", sa.String(64), primary_key=True),
        sa.Column("trace_id", sa.String(256), nullable=False),
        sa.Column("rank", sa.Float, nullable=False),
        sa.Column("updated_at", sa.Float, nullable=False),
    )
    op.create_index("ix_sample_claim_updated_at", "sample_claim", ["updated_at"])


def downgrade() -> None:
    op.drop_index("ix_sample_claim_updated_at", "sample_claim")
    op.drop_table("sample_claim")
    op.drop_column("sample", "rank")
