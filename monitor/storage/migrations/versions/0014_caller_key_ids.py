"""caller key ids: which caller key made a row's pseudonyms and keyed shown ids

Revision ID: 0014
Revises: 0013

The caller key is a keyring (``redaction.caller_key`` and ``previous_caller_keys``): new rows are
made under its newest key, and look-ups try every key. A pseudonym is an HMAC and cannot be
re-keyed, so rows keep the id of the key they were made with (``keyring.key_id``), and
``ragmon keys rotate`` counts the rows each previous key is still needed by. Rows written before
this revision, or by code older than it, hold "": made under a key of the ring, which one unknown.
"""

import sqlalchemy as sa
from alembic import op

revision = "0014"
down_revision = "0013"
branch_labels = None
depends_on = None

# additive: a column with a server default on four tables; the code of the revision before runs on
# this schema, its rows holding "" (docs/upgrades.md)
change = "expand"

TABLES = ("sample", "sample_claim", "finding", "unread_trace")


def upgrade() -> None:
    for table in TABLES:
        op.add_column(table, sa.Column("caller_key_id", sa.String(16), nullable=False, server_default=""))


def downgrade() -> None:
    for table in TABLES:
        op.drop_column(table, "caller_key_id")
