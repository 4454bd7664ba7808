"""score_share: the top scores each replica judged, so that every replica's low-score baseline
holds them all

Revision ID: 0006
Revises: 0005

One row per (index, retriever) per replica per sync: a short list of scores, kept until newer rows
hold a whole window of that pair (monitor/storage/score_share.py).
"""

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None
# additive: the code of the revision before runs on this schema (docs/upgrades.md)
change = "expand"


def upgrade() -> None:
    op.create_table(
        "score_share",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("index_name", sa.String(256), nullable=False),
        sa.Column("retriever", sa.String(256), nullable=False),
        sa.Column("replica", sa.String(64), nullable=False),
        sa.Column("n", sa.Integer, nullable=False),
        sa.Column("scores", sa.LargeBinary, nullable=False),
        sa.Column("recorded_at", sa.Float, nullable=False),
    )


def downgrade() -> None:
    op.drop_table("score_share")
