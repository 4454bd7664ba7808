"""${message}

Revision ID: ${up_revision}
Revises: ${down_revision | comma,n}
"""

import sqlalchemy as sa
from alembic import op

revision = ${repr(up_revision)}
down_revision = ${repr(down_revision)}
branch_labels = None
depends_on = None
# "expand": additive, the code of the revision before keeps working on this schema; "contract":
# destructive, with needs_code naming the oldest revision whose code runs on it (docs/upgrades.md)
change = None
# a step that cannot be undone says why here (`ragmon db downgrade` refuses before changing anything)
irreversible = None


def upgrade() -> None:
    ${upgrades if upgrades else "pass"}


def downgrade() -> None:
    ${downgrades if downgrades else "pass"}
