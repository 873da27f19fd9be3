"""Meta models (console contract §6.3).

Revision ID: 0002
Revises: 0001
"""

import sqlalchemy as sa
from alembic import op

import gateway.store.types

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "meta_models",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("model_name", sa.String(length=100), nullable=False),
        sa.Column("name", sa.String(length=100), nullable=False),
        sa.Column("description", sa.Text(), server_default="", nullable=False),
        sa.Column("dsl", sa.Text(), nullable=False),
        sa.Column("provider", sa.String(length=100), server_default="meta", nullable=False),
        sa.Column("provider_name", sa.String(length=100), server_default="Meta Module",
                  nullable=False),
        sa.Column("provider_icon_url", sa.Text(), server_default="", nullable=False),
        sa.Column("expose_referenced_models", sa.Boolean(), server_default=sa.text("true"),
                  nullable=False),
        sa.Column("billing_mode", sa.String(length=16), server_default="actual",
                  nullable=False),
        sa.Column("input_price_nanos", sa.BigInteger(), server_default=sa.text("0"),
                  nullable=False),
        sa.Column("output_price_nanos", sa.BigInteger(), server_default=sa.text("0"),
                  nullable=False),
        sa.Column("cached_input_price_nanos", sa.BigInteger(), server_default=sa.text("0"),
                  nullable=False),
        sa.Column("enabled", sa.Boolean(), server_default=sa.text("true"), nullable=False),
        sa.Column("created_at", gateway.store.types.UTCDateTime(), nullable=False),
        sa.Column("updated_at", gateway.store.types.UTCDateTime(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_meta_models")),
        sa.UniqueConstraint("model_name", name=op.f("uq_meta_models_model_name")),
    )


def downgrade() -> None:
    op.drop_table("meta_models")
