"""The store functions that took over SQL from console routes and the admin CLI keep their
transactions whole and say what the database refused in our own exceptions.

Real SQLite (the store's own engine settings) and real PostgreSQL: a constraint violation rolls
back everything the transaction wrote and arrives as ``WriteConflict``; first-run setup is
marked once; an OIDC sign-in links, names and refuses inside one transaction, and a callback
that loses a race for the same subject gets ``IdentityConflict``, not a database error.
"""

from __future__ import annotations

import shutil
import tempfile
import threading
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import select
from twisted.trial.unittest import TestCase

from gateway.store import schema
from gateway.store import users as user_store
from gateway.store.conflicts import WriteConflict, refusing_conflicts
from gateway.store.connection import Connection, Engine
from gateway.store.first_run import SetupAlreadyCompleted, mark_setup_completed, setup_pending
from gateway.store.oidc_accounts import (
    IdentityConflict,
    LinkRefused,
    OidcIdentity,
    SignupPolicy,
    bind,
    sign_in,
)
from gateway.store.pool import make_engine
from gateway.store.settings_rows import read_settings, write_settings
from tests.support.migrated_databases import migrated_postgres_url, migrated_sqlite_url

NOW = datetime(2026, 11, 25, 12, 0, tzinfo=UTC)
OPEN = SignupPolicy(open=True, suffixes=False, domain_ok=True, group_id=None, referral="",
                    referral_enabled=False)


def identity(sub: str, email: str | None, *, verified: bool = True,
             name: str = "Ada Lovelace") -> OidcIdentity:
    return OidcIdentity(sub=sub, email=email, name=name, email_verified=verified,
                        avatar="https://idp.example/ada.png")


def _duplicate_group(conn: Connection) -> None:
    write_settings(conn, {"site_name": "written before the conflict"}, NOW)
    for _ in range(2):
        conn.execute(schema.groups.insert().values(
            name="twice", multiplier_nanos=1_000_000_000,
            created_at=NOW, updated_at=NOW))


class BoundaryWriteTests(TestCase):
    def database_url(self) -> str:
        directory = tempfile.mkdtemp(prefix="lockgate-boundary-")
        self.addCleanup(shutil.rmtree, directory, True)
        return migrated_sqlite_url(directory)

    def setUp(self) -> None:
        self.engine: Engine = make_engine(self.database_url(), 2)[0]
        self.addCleanup(self.engine.dispose)

    def run_in(self, fn: Any, *args: Any) -> Any:
        with self.engine.begin() as conn:
            return fn(conn, *args)

    def user_row(self, user_id: int) -> dict[str, Any]:
        with self.engine.connect() as conn:
            row = conn.execute(select(schema.users).where(schema.users.c.id == user_id))
            return dict(row.mappings().one())

    def make_user(self, username: str, email: str) -> int:
        return int(self.run_in(lambda conn: user_store.create_user(
            conn, username=username, email=email, password_hash=None, now=NOW)))

    # --- WriteConflict ----------------------------------------------------------------------

    def test_a_constraint_violation_is_a_write_conflict_and_undoes_the_transaction(self) -> None:
        with self.assertRaises(WriteConflict):
            self.run_in(refusing_conflicts, _duplicate_group)
        settings = self.run_in(read_settings)
        assert "site_name" not in settings
        with self.engine.connect() as conn:
            assert conn.execute(select(schema.groups.c.id).where(
                schema.groups.c.name == "twice")).first() is None

    def test_refusing_conflicts_passes_results_and_other_errors_through(self) -> None:
        assert self.run_in(refusing_conflicts, lambda conn, n: n + 1, 41) == 42

        def refused(conn: Connection) -> None:
            raise LookupError("not a database error")

        with self.assertRaises(LookupError):
            self.run_in(refusing_conflicts, refused)

    # --- first-run marker -------------------------------------------------------------------

    def test_setup_is_marked_completed_once(self) -> None:
        assert self.run_in(setup_pending)
        self.run_in(mark_setup_completed, NOW)
        assert not self.run_in(setup_pending)
        with self.assertRaises(SetupAlreadyCompleted):
            self.run_in(mark_setup_completed, NOW)
        assert self.run_in(read_settings)["setup_completed_at"] == NOW.isoformat()

    # --- OIDC accounts ----------------------------------------------------------------------

    def test_a_new_identity_gets_an_account_named_after_it_and_signs_in_again_by_subject(
            self) -> None:
        self.make_user("Ada-Lovelace", "someone@example.com")
        user, relations = self.run_in(sign_in, identity("sub-1", "ada@example.com"), OPEN,
                                      "Ada-Lovelace", NOW)
        assert user["username"] == "Ada-Lovelace-2"
        assert user["oidc_sub"] == "sub-1"
        assert user["avatar_url"] == "https://idp.example/ada.png"
        assert user["email_verified"] is True
        assert relations["group"]["id"] == user["group_id"]
        again, _ = self.run_in(sign_in, identity("sub-1", "ada@example.com"), OPEN,
                               "ignored", NOW)
        assert again["id"] == user["id"]

    def test_a_verified_email_links_the_existing_account(self) -> None:
        user_id = self.make_user("ada", "ada@example.com")
        user, _ = self.run_in(sign_in, identity("sub-1", "ada@example.com"), OPEN, "ada", NOW)
        assert user["id"] == user_id
        row = self.user_row(user_id)
        assert row["oidc_sub"] == "sub-1"
        assert row["email_verified"] is True

    def test_refusals_change_nothing(self) -> None:
        user_id = self.make_user("ada", "ada@example.com")
        with self.assertRaises(LinkRefused):
            self.run_in(sign_in, identity("sub-1", "ada@example.com", verified=False), OPEN,
                        "ada", NOW)
        closed = SignupPolicy(open=False, suffixes=False, domain_ok=True, group_id=None,
                              referral="", referral_enabled=False)
        with self.assertRaises(LinkRefused):
            self.run_in(sign_in, identity("sub-2", "new@example.com"), closed, "new", NOW)
        other = self.make_user("grace", "grace@example.com")
        self.run_in(bind, other, identity("sub-3", "grace@example.com"), NOW)
        with self.assertRaises(LinkRefused):
            self.run_in(bind, user_id, identity("sub-3", "ada@example.com"), NOW)
        assert self.user_row(user_id)["oidc_sub"] is None
        with self.engine.connect() as conn:
            emails = set(conn.execute(select(schema.users.c.email)).scalars())
        assert emails == {"ada@example.com", "grace@example.com"}


class PostgresBoundaryWriteTests(BoundaryWriteTests):
    def database_url(self) -> str:
        return migrated_postgres_url()

    def test_a_callback_that_loses_the_race_for_a_subject_gets_identity_conflict(self) -> None:
        # The first callback creates the account bound to sub-1 but has not committed; the
        # second (same subject, the provider now reports another address) sees no account,
        # creates its own and waits on the unique subject until the first commits.
        self.make_user("someone", "someone@example.com")  # the default group exists already
        first = self.engine.connect()
        self.addCleanup(first.close)
        first_tx = first.begin()
        sign_in(first, identity("sub-1", "ada@example.com"), OPEN, "ada", NOW)
        outcome: list[BaseException | object] = []

        def second() -> None:
            try:
                outcome.append(self.run_in(sign_in, identity(
                    "sub-1", "ada@elsewhere.example", name="Ada L"), OPEN, "ada-l", NOW))
            except BaseException as exc:
                outcome.append(exc)

        thread = threading.Thread(target=second)
        thread.start()
        thread.join(1.0)
        assert thread.is_alive(), "the second callback did not wait for the first"
        first_tx.commit()
        thread.join(30)
        assert len(outcome) == 1
        assert isinstance(outcome[0], IdentityConflict), outcome
        with self.engine.connect() as conn:
            emails = set(conn.execute(select(schema.users.c.email)).scalars())
        assert emails == {"someone@example.com", "ada@example.com"}
