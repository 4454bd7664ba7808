"""schema_window: the oldest code that runs on the schema, for code older than the schema

Revision ID: 0010
Revises: 0009

One row, written by the code that upgrades or downgrades the database (monitor/storage/schema_window.py):
the schema's revision, the oldest code head that runs on it (after the contract steps so far; empty
when there is none) and the ragmon version that wrote it. A pod of an older release that finds a
revision it does not know reads it to decide whether it may start (docs/upgrades.md).
"""

import sqlalchemy as sa
from alembic import op

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None
# additive: the code of the revision before runs on this schema (docs/upgrades.md)
change = "expand"
irreversible = None


def upgrade() -> None:
    op.create_table(
        "schema_window",
        sa.Column("revision", sa.String(32), primary_key=True),
        sa.Column("oldest_code", sa.String(32), nullable=True),
        sa.Column("written_by", sa.String(64), nullable=False),
    )


def downgrade() -> None:
    op.drop_table("schema_window")
