"""finding: the whole principal lists apart from the bounded reason

Revision ID: 0009
Revises: 0008

A finding's reason named every principal of the caller and of the ACL: a caller with hundreds of
long groups made a reason of hundreds of kilobytes on every row, read by every page of findings.
The reason now names the first few of each list and counts the rest; the whole lists (bounded)
are kept in ``principals``, read only by ``ragmon trace show --full`` (monitor/findings/store.py).
Rows stored before this revision keep their reasons and get ``{}``.
"""

import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None
# additive: the code of the revision before runs on this schema (docs/upgrades.md)
change = "expand"


def upgrade() -> None:
    op.add_column("finding", sa.Column("principals", sa.JSON, nullable=False, server_default=sa.text("'{}'")))


def downgrade() -> None:
    op.drop_column("finding", "principals")
