"""The names of the database handles that code outside ``gateway/store`` passes along.

Only ``gateway/store`` imports SQLAlchemy (an import contract in ``.importlinter`` checks it).
Console services and jobs still hand the transaction's connection from one store function to
the next (that is how several writes share one transaction), and the admin command line holds
an engine; they name those types from here instead of importing SQLAlchemy themselves.
"""

from __future__ import annotations

from sqlalchemy.engine import Connection, Engine

__all__ = ["Connection", "Engine"]
