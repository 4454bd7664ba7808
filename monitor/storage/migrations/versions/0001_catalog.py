"""catalog: documents and what each index holds

Revision ID: 0001
Revises:
"""

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None
# additive: the code of the revision before runs on this schema (docs/upgrades.md)
change = "expand"


def upgrade() -> None:
    op.create_table(
        "catalog_document",
        sa.Column("doc_id", sa.String(256), primary_key=True),
        sa.Column("tenant", sa.String(256), nullable=False),
        sa.Column("version", sa.String(256), nullable=False),
        sa.Column("modified_at", sa.Float, nullable=False),
        sa.Column("acl", sa.JSON, nullable=True),
        sa.Column("deleted", sa.Boolean, nullable=False),
        sa.Column("history", sa.JSON, nullable=False),
    )
    op.create_table(
        "catalog_indexed",
        sa.Column("index_name", sa.String(256), primary_key=True),
        sa.Column("doc_id", sa.String(256), primary_key=True),
        sa.Column("version", sa.String(256), nullable=False),
        sa.Column("indexed_at", sa.Float, nullable=False),
        sa.Column("embedding_model", sa.String(256), nullable=True),
        sa.Column("chunks", sa.Integer, nullable=True),
    )


def downgrade() -> None:
    op.drop_table("catalog_indexed")
    op.drop_table("catalog_document")
