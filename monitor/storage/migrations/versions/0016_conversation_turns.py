"""conversation_turn: the redacted turns of conversations, for the history a sample carries

Revision ID: 0016
Revises: 0015

One row per chat turn (a trace with a conversation id; monitor/labeling/turn_store.py): its shown
trace id and tenant, the conversation's and the caller's pseudonyms, its number and time, and its
redacted message, searched queries and answer, each bounded. Kept the newest turns per
conversation and ``sampling.history_retention_days``; read when a later turn's sample is stored.
"""

import sqlalchemy as sa
from alembic import op

revision = "0016"
down_revision = "0015"
branch_labels = None
depends_on = None

# additive: a new table; the code of the revision before runs on this schema (docs/upgrades.md)
change = "expand"


def upgrade() -> None:
    op.create_table(
        "conversation_turn",
        sa.Column("trace_id", sa.String(256), primary_key=True),
        sa.Column("tenant", sa.String(256), nullable=False),
        sa.Column("conversation", sa.String(64), nullable=False),
        sa.Column("caller", sa.String(64), nullable=False),
        sa.Column("turn", sa.Integer, nullable=True),
        sa.Column("time", sa.Float, nullable=False),
        sa.Column("message", sa.Text, nullable=False),
        sa.Column("searched", sa.JSON, nullable=False),
        sa.Column("answer", sa.Text, nullable=True),
        sa.Column("recorded_at", sa.Float, nullable=False),
        sa.Column("caller_key_id", sa.String(16), nullable=False, server_default=""),
    )
    op.create_index("ix_conversation_turn_conversation", "conversation_turn", ["tenant", "conversation"])
    op.create_index("ix_conversation_turn_recorded_at", "conversation_turn", ["recorded_at"])


def downgrade() -> None:
    op.drop_index("ix_conversation_turn_recorded_at", "conversation_turn")
    op.drop_index("ix_conversation_turn_conversation", "conversation_turn")
    op.drop_table("conversation_turn")
