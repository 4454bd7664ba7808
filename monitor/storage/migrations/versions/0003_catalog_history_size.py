"""catalog: the number of versions a document's history holds, which orders writes

Revision ID: 0003
Revises: 0002

Replicas that read the same catalog topic write the same rows, each at its own pace; a write is
applied only when it is further along than the row (a later modification, or as late with more
history), so a replica behind the others never moves a row back. See storage/catalog_store.py.
"""

import json

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None
# additive: the code of the revision before runs on this schema (docs/upgrades.md)
change = "expand"


def upgrade() -> None:
    op.add_column("catalog_document", sa.Column("history_size", sa.Integer, nullable=False, server_default="0"))
    connection = op.get_bind()
    rows = connection.execute(sa.text("SELECT doc_id, history FROM catalog_document")).fetchall()
    for doc_id, history in rows:
        size = len(json.loads(history) if isinstance(history, str) else history or {})
        connection.execute(sa.text("UPDATE catalog_document SET history_size = :size WHERE doc_id = :doc_id"),
                           {"size": size, "doc_id": doc_id})


def downgrade() -> None:
    op.drop_column("catalog_document", "history_size")
