"""Database URLs as an operator may see them: the password hidden, a SQLite path absolute.

Start-up and ``lockgate-admin check`` say which database a process is on; neither may print a
password, and a relative SQLite file name does not say where the file is.
"""

from __future__ import annotations

import os

from sqlalchemy.engine import Engine, make_url


def display_url(url: str) -> str:
    """The URL without its password; a relative SQLite file made absolute (where is it?)."""
    try:
        parsed = make_url(url)
    except Exception:
        return "(unparsable URL)"
    name = parsed.database
    if parsed.drivername.startswith("sqlite") and name and name != ":memory:" \
            and not os.path.isabs(name):
        parsed = parsed.set(database=os.path.abspath(name))
    return parsed.render_as_string(hide_password=True)


def engine_display(engine: Engine) -> str:
    """The engine's URL with the password hidden."""
    return engine.url.render_as_string(hide_password=True)
