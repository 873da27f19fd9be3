"""``lockgate-admin``: each command on a real SQLite file, as an operator would run it.

Most tests call ``run(argv)`` in this process (the command line, the options and the database
are all real); one runs the installed console script to prove the entry point.
"""

from __future__ import annotations

import io
import os
import shutil
import subprocess
import sys
import tempfile
from typing import Any

import orjson
from argon2 import PasswordHasher
from sqlalchemy import create_engine, select, update
from twisted.trial.unittest import TestCase

from gateway.store import schema
from tap.admin_cli.main import run

ADMIN = os.path.join(os.path.dirname(sys.executable), "lockgate-admin")


class AdminCliTests(TestCase):
    def setUp(self) -> None:
        directory = tempfile.mkdtemp(prefix="lockgate-admin-")
        self.addCleanup(shutil.rmtree, directory, True)
        self.directory = directory
        self.url = f"sqlite:///{os.path.join(directory, 'db.sqlite3')}"
        self.options = ["--database", self.url,
                        "--secret-file", os.path.join(directory, "secret")]

    def admin(self, *argv: str, stdin: str = "") -> tuple[int, str, str]:
        out, err = io.StringIO(), io.StringIO()
        status = run([*self.options, *argv], out=out, err=err, stdin=io.StringIO(stdin))
        return status, out.getvalue(), err.getvalue()

    def sql(self, work: Any) -> Any:
        engine = create_engine(self.url)
        try:
            with engine.begin() as conn:
                return work(conn)
        finally:
            engine.dispose()

    def migrated_with_admin(self) -> None:
        assert self.admin("migrate")[0] == 0
        status, out, err = self.admin("create-admin", "root", "root@example.com",
                                      stdin="first password\n")
        assert status == 0, err
        assert "first-run setup marked done" in out

    def test_check_reports_pending_migrations_then_current(self) -> None:
        status, out, _ = self.admin("check")
        assert status == 1
        assert "migrations pending: run 'lockgate-admin migrate'" in out
        assert os.path.join(self.directory, "secret") in out
        assert self.admin("migrate")[0] == 0
        status, out, _ = self.admin("check")
        assert status == 0 and "(current)" in out
        assert "first-run setup: pending" in out

    def test_create_admin_then_reset_password_signs_out(self) -> None:
        self.migrated_with_admin()
        users = schema.users
        before = self.sql(lambda c: c.execute(select(users.c.password_hash, users.c.is_admin,
                                                     users.c.token_version)).one())
        assert before[1] is True
        password_file = os.path.join(self.directory, "pw")
        with open(password_file, "w") as handle:
            handle.write("second password\n")
        status, out, _ = self.admin("reset-password", "--password-file", password_file, "root")
        assert status == 0 and "sessions are signed out" in out
        after = self.sql(lambda c: c.execute(select(users.c.password_hash,
                                                    users.c.token_version)).one())
        PasswordHasher().verify(after[0], "second password")
        assert after[1] == before[2] + 1
        # setup is done: a second create-admin works but does not touch setup again
        status, out, _ = self.admin("create-admin", "ops", "ops@example.com",
                                    stdin="third password\n")
        assert status == 0 and "setup" not in out

    def test_bad_input_is_refused_with_what_to_do_and_changes_nothing(self) -> None:
        self.migrated_with_admin()
        status, _, err = self.admin("reset-password", "nobody", stdin="long enough pw\n")
        assert status == 2 and "no user with username, email or id 'nobody'" in err
        status, _, err = self.admin("reset-password", "root", stdin="short\n")
        assert status == 2 and "8 to 1024 characters" in err
        status, _, err = self.admin("create-admin", "root", "x@example.com",
                                    stdin="long enough pw\n")
        assert status == 2 and "username is taken" in err
        status, _, err = self.admin("reset-password")
        assert status == 2 and "expected <user>" in err
        assert self.sql(lambda c: len(c.execute(select(schema.users.c.id)).all())) == 1

    def test_export_then_import_round_trips_the_configuration(self) -> None:
        self.migrated_with_admin()
        self.sql(lambda c: c.execute(schema.user_channels.insert().values(
            name="standard", created_at=schema_now(), updated_at=schema_now())))
        target = os.path.join(self.directory, "config.json")
        status, out, _ = self.admin("export", "-o", target)
        assert status == 0
        with open(target, "rb") as handle:
            doc = orjson.loads(handle.read())
        assert [uc["name"] for uc in doc["user_channels"]] == ["standard"]
        doc["user_channels"][0]["description"] = "restored"
        with open(target, "wb") as handle:
            handle.write(orjson.dumps(doc))
        status, out, err = self.admin("import", target)
        assert status == 0, err
        assert "imported sections" in out and "restart running processes" in out
        assert self.sql(lambda c: c.execute(select(schema.user_channels.c.description))
                        .scalar_one()) == "restored"
        # an invalid document names the problem and writes nothing
        doc["user_channels"][0]["description"] = "half applied"
        doc["system_settings"].append({"key": "no_such_setting", "value": "1"})
        with open(target, "wb") as handle:
            handle.write(orjson.dumps(doc))
        status, _, err = self.admin("import", target)
        assert status == 2 and "no_such_setting" in err, err
        assert self.sql(lambda c: c.execute(select(schema.user_channels.c.description))
                        .scalar_one()) == "restored"

    def test_verify_ledger_reports_a_planted_difference(self) -> None:
        self.migrated_with_admin()
        status, out, _ = self.admin("verify-ledger")
        assert status == 0 and "no difference" in out
        users = schema.users
        # a balance written outside the ledger
        self.sql(lambda c: c.execute(update(users).values(balance_nanos=5_000_000_000)))
        status, out, _ = self.admin("verify-ledger")
        assert status == 1, out
        assert ("DIFFERENCE user 1: balance vs sum of ledger rows: expected 0, "
                "found 5000000000") in out
        # a key whose used quota disagrees with its usage logs
        self.sql(lambda c: c.execute(schema.api_keys.insert().values(
            user_id=1, name="k", key_hash="h" * 64, key_prefix="sk-", spent_nanos=7,
            created_at=schema_now(), updated_at=schema_now())))
        status, out, _ = self.admin("verify-ledger")
        assert "api key 1: used quota vs usage-log costs less refunds: expected 0, found 7" in out
        assert "2 difference(s) found" in out

    def test_the_console_script_is_installed(self) -> None:
        result = subprocess.run([ADMIN, *self.options, "check"], capture_output=True,
                                text=True, timeout=60, check=False)
        assert result.returncode == 1, result
        assert "migrations pending" in result.stdout


def schema_now() -> Any:
    from datetime import UTC, datetime

    return datetime.now(UTC)
