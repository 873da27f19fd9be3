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

from twisted.logger import Logger

from gateway.store.database_url import display_url
from gateway.store.users import admin_exists
from tap.version import version_line
from tap.worker_mode import HUB as WORKER_HUB

log = Logger()


def report_opened(options: dict[str, Any], secret_created: bool) -> None:
    """After the database and the caches are open (before listening)."""
    redis = options.get("redis")
    log.info(
        "{version}: database {database}; secret file {secret_file} ({secret_state}); "
        "shared state {shared}{node}",
        version=version_line(), database=display_url(options["database"]),
        secret_file=os.path.abspath(options["secret-file"]),
        secret_state="created now, mode 0600: back it up" if secret_created else "existing",
        shared=(display_url(redis) if redis else
                "in the --workers supervisor" if os.environ.get(WORKER_HUB) else
                "in this process (no --redis)"),
        node=f"; node {options['node-name']}" if options.get("node-name") else "")


async def report_setup(db: Any, listen: list[str]) -> None:
    """After the listeners are up: say so, and whether first-run setup is still pending."""
    log.info("Lockgate listening on {endpoints}", endpoints=", ".join(listen))
    if not await db.transaction(admin_exists):
        log.warn("First-run setup is pending: POST /api/setup with username, email and "
                 "password creates the first administrator (or run 'lockgate-admin "
                 "create-admin'); see README 'First calls'")
