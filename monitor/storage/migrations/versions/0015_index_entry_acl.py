"""catalog_indexed: the ACL each index entry holds, for reconciliation with the document's own

Revision ID: 0015
Revises: 0014

An index event may say who the index lets read a document's chunks (``IndexEvent.acl``, as written
into their metadata when they were embedded). Kept beside the entry, it is compared with the
document's ACL at the source: a source ACL narrower than the index's is a revocation still waiting
in the index. Rows written before this revision, or by code older than it, hold NULL: unknown.
"""

import sqlalchemy as sa
from alembic import op

revision = "0015"
down_revision = "0014"
branch_labels = None
depends_on = None

# additive: a nullable column; the code of the revision before runs on this schema, its entries
# holding NULL (docs/upgrades.md)
change = "expand"


def upgrade() -> None:
    op.add_column("catalog_indexed", sa.Column("acl", sa.JSON, nullable=True))


def downgrade() -> None:
    op.drop_column("catalog_indexed", "acl")
