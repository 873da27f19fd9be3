"""What the start-up log tells an operator: where the data is, what listens, what to do next.

A newcomer's first question after ``bash scripts/run.sh`` is "where did it put things and what
now?"; a fleet operator's is "which database and Redis is this process on?".  So start-up says
it in a few plain lines -- the database (password hidden), the secret file (and whether it was
just created), the shared state, every listener, and, while no administrator exists, that
first-run setup is pending and how to do it.
"""

from __future__ import annotations

import os
from typing import Any

from sqlalchemy.engine import make_url
from twisted.logger import Logger

from gateway.store.users import admin_exists
from tap.version import version_line

log = Logger()


def _hidden_password(url: str) -> str:
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


def report_opened(options: dict[str, Any], secret_created: bool) -> None:
    """After the database and the caches are open (before listening)."""
    redis = options.get("redis")
    log.info(
        "{version}: database {database}; secret file {secret_file} ({secret_state}); "
        "shared state {shared}{node}",
        version=version_line(), database=_hidden_password(options["database"]),
        secret_file=os.path.abspath(options["secret-file"]),
        secret_state="created now, mode 0600: back it up" if secret_created else "existing",
        shared=_hidden_password(redis) if redis else "in this process (no --redis)",
        node=f"; node {options['node-name']}" if options.get("node-name") else "")


async def report_setup(db: Any, listen: list[str]) -> None:
    """After the listeners are up: say so, and whether first-run setup is still pending."""
    log.info("Lockgate listening on {endpoints}", endpoints=", ".join(listen))
    if not await db.transaction(admin_exists):
        log.warn("First-run setup is pending: POST /api/setup with username, email and "
                 "password creates the first administrator (or run 'lockgate-admin "
                 "create-admin'); see README 'First calls'")
