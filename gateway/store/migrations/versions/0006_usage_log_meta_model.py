"""Usage logs keep the meta model a client named beside the model that served it (issue 17).

Revision ID: 0006
Revises: 0005
"""

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("usage_logs") as batch:
        batch.add_column(sa.Column("meta_model_name", sa.String(100),
                                   server_default=sa.text("''"), nullable=False))


def downgrade() -> None:
    with op.batch_alter_table("usage_logs") as batch:
        batch.drop_column("meta_model_name")
