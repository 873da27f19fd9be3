"""What every table module shares: the one ``MetaData`` (with its constraint naming) and the
column helpers.  Its own module so the feature-area table modules (``schema_links``,
``schema_assistant``, ``schema_studio``) and ``schema`` build on it without importing each other.
"""

from __future__ import annotations

from sqlalchemy import Column, Integer, MetaData, text

from gateway.store.types import UTCDateTime

NAMING = {
    "ix": "ix_%(column_0_label)s",
    "uq": "uq_%(table_name)s_%(column_0_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}
metadata = MetaData(naming_convention=NAMING)

FALSE = text("false")
TRUE = text("true")
ZERO = text("0")


def _timestamps() -> list[Column]:
    return [
        Column("created_at", UTCDateTime, nullable=False),
        Column("updated_at", UTCDateTime, nullable=False),
    ]


def _id() -> Column:
    return Column("id", Integer, primary_key=True, autoincrement=True)
