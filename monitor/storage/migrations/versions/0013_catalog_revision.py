"""catalog: a revision counter, so that a process sees the catalog changes another one wrote

Revision ID: 0013
Revises: 0012

Every write of catalog rows takes the next value of ``catalog_revision`` (one row) in its
transaction and stamps the rows it changes with it. A running ``ragmon serve`` polls that one
value every few seconds and, when it moved, reads only the rows stamped after the value it last
saw (``ragmon replay`` of catalog events into the same database, another replica, the catalog
sources). Rows written before this revision, or by code older than it, carry 0 and are read at
start-up.
"""

import sqlalchemy as sa
from alembic import op

revision = "0013"
down_revision = "0012"
branch_labels = None
depends_on = None

# additive: two columns with a server default and a new table; the code of the revision before runs
# on this schema, its writes stamped 0 (seen by a running process at its next start) (docs/upgrades.md)
change = "expand"


def upgrade() -> None:
    for table in ("catalog_document", "catalog_indexed"):
        op.add_column(table, sa.Column("revision", sa.BigInteger, nullable=False, server_default="0"))
        op.create_index(f"ix_{table}_revision", table, ["revision"])
    # its one row is made by the first write (catalog_store.next_revision): a restore brings its own
    op.create_table("catalog_revision", sa.Column("id", sa.Integer, primary_key=True, autoincrement=False),
                    sa.Column("value", sa.BigInteger, nullable=False))


def downgrade() -> None:
    op.drop_table("catalog_revision")
    for table in ("catalog_document", "catalog_indexed"):
        op.drop_index(f"ix_{table}_revision", table)
        op.drop_column(table, "revision")
