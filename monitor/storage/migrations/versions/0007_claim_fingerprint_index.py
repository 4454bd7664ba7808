"""sample_claim: an index on (tenant, week, fingerprint)

Revision ID: 0007
Revises: 0006

Each batch looks up the claims of its question fingerprints in a tenant-week. The primary key
(tenant, week, stratum, fingerprint) serves that only up to the week, so every lookup read every
claim of the week: a cost growing with the week's traffic (a claim per stratum and fingerprint
offered), paid on every batch.
"""

from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None
# additive: the code of the revision before runs on this schema (docs/upgrades.md)
change = "expand"


def upgrade() -> None:
    op.create_index("ix_sample_claim_fingerprint", "sample_claim", ["tenant", "week", "fingerprint"])


def downgrade() -> None:
    op.drop_index("ix_sample_claim_fingerprint", "sample_claim")
