"""samples: the labeling queue

Revision ID: 0002
Revises: 0001
"""

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None
# additive: the code of the revision before runs on this schema (docs/upgrades.md)
change = "expand"


def upgrade() -> None:
    op.create_table(
        "sample",
        sa.Column("trace_id", sa.String(256), primary_key=True),
        sa.Column("tenant", sa.String(256), nullable=False),
        sa.Column("week", sa.String(8), nullable=False),
        sa.Column("strata", sa.JSON, nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("split", sa.String(16), nullable=False),
        sa.Column("fingerprint", sa.String(64), nullable=False),
        sa.Column("trace_time", sa.Float, nullable=False),
        sa.Column("created_at", sa.Float, nullable=False),
        sa.Column("updated_at", sa.Float, nullable=False),
        sa.Column("payload", sa.JSON, nullable=False),
    )
    op.create_index("ix_sample_week_tenant", "sample", ["week", "tenant"])
    op.create_index("ix_sample_status", "sample", ["status"])


def downgrade() -> None:
    op.drop_index("ix_sample_status", "sample")
    op.drop_index("ix_sample_week_tenant", "sample")
    op.drop_table("sample")
