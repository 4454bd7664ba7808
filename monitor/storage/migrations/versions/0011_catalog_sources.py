"""catalog sources: the last snapshot of each source, and the digest of served documents

Revision ID: 0011
Revises: 0010

``catalog_source_item`` holds, per catalog source, the document and index events its last complete
sync applied (monitor/storage/catalog_source_store.py); ``served_document`` counts the passages
traffic served per index, tenant, document and version, for ``ragmon catalog check``
(monitor/storage/served_documents.py). Both are new: nothing stored before changes.
"""

import sqlalchemy as sa
from alembic import op

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None

# additive: two new tables; the code of the revision before runs on this schema (docs/upgrades.md)
change = "expand"


def upgrade() -> None:
    op.create_table(
        "catalog_source_item",
        sa.Column("source", sa.String(64), primary_key=True),
        sa.Column("index_name", sa.String(256), primary_key=True),
        sa.Column("doc_id", sa.String(256), primary_key=True),
        sa.Column("event", sa.Text, nullable=False),
    )
    op.create_table(
        "served_document",
        sa.Column("index_name", sa.String(256), primary_key=True),
        sa.Column("tenant", sa.String(256), primary_key=True),
        sa.Column("doc_id", sa.String(256), primary_key=True),
        sa.Column("doc_version", sa.String(256), primary_key=True),
        sa.Column("id_only", sa.Boolean, primary_key=True),
        sa.Column("passages", sa.Integer, nullable=False),
        sa.Column("last_seen", sa.Float, nullable=False),
    )
    op.create_index("ix_served_document_last_seen", "served_document", ["last_seen"])


def downgrade() -> None:
    op.drop_index("ix_served_document_last_seen", "served_document")
    op.drop_table("served_document")
    op.drop_table("catalog_source_item")
