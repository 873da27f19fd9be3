"""Usage logs keep what the upstream answered and why the channel failed (admin's view).

Revision ID: 0003
Revises: 0002
"""

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("usage_logs") as batch:
        batch.add_column(sa.Column("upstream_status", sa.Integer(), nullable=True))
        batch.add_column(sa.Column("failure_reason", sa.Text(), server_default=sa.text("''"),
                                   nullable=False))


def downgrade() -> None:
    with op.batch_alter_table("usage_logs") as batch:
        batch.drop_column("failure_reason")
        batch.drop_column("upstream_status")
