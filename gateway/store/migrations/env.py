"""Alembic environment: always runs on a connection handed in by ``gateway.store.migrate``."""

from alembic import context

from gateway.store.schema import metadata

connection = context.config.attributes["connection"]
context.configure(
    connection=connection,
    target_metadata=metadata,
    render_as_batch=connection.dialect.name == "sqlite",
    compare_type=True,
)
with context.begin_transaction():
    context.run_migrations()
