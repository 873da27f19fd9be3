"""Entry point of the ``lockgate-admin`` console script: parse, run one command, exit."""

from __future__ import annotations

import getpass
import sys
from typing import IO, Any

from argon2 import PasswordHasher
from twisted.python import usage

from gateway.store.connection import Engine
from gateway.store.pool import make_engine
from tap.admin_cli import commands, fleet
from tap.admin_cli.options import AdminOptions


def _password_source(path: str | None, stdin: IO[str]) -> commands.PasswordSource:
    def read() -> str:
        if path:
            try:
                with open(path, encoding="utf-8") as handle:
                    return handle.readline().rstrip("\r\n")
            except OSError as exc:
                raise commands.Refused(f"cannot read --password-file {path}: "
                                       f"{exc.strerror}") from None
        if not stdin.isatty():
            return stdin.readline().rstrip("\r\n")
        first = getpass.getpass("New password: ")
        if getpass.getpass("Repeat it: ") != first:
            raise commands.Refused("the two passwords differ")
        return first
    return read


def _read_document(path: str, stdin: IO[str]) -> bytes:
    if path == "-":
        return stdin.buffer.read() if hasattr(stdin, "buffer") else stdin.read().encode()
    try:
        with open(path, "rb") as handle:
            return handle.read()
    except OSError as exc:
        raise commands.Refused(f"cannot read {path}: {exc.strerror}") from None


def _dispatch(config: AdminOptions, engine: Engine, out: IO[str], stdin: IO[str]) -> int:
    name, sub = config.subCommand, config.subOptions
    hasher = PasswordHasher()
    if name == "reset-password":
        redis = config["redis"]
        return commands.reset_password(
            engine, out, sub["user"], _password_source(sub["password-file"], stdin), hasher,
            announce=(lambda user_id: fleet.announce_user(redis, user_id)) if redis else None)
    if name == "create-admin":
        return commands.create_admin(engine, out, sub["username"], sub["email"],
                                     _password_source(sub["password-file"], stdin), hasher)
    if name == "migrate":
        return commands.run_migrations(engine, out)
    if name == "check":
        return commands.check(engine, out, config["database"], config["secret-file"])
    if name == "export":
        if sub["output"] == "-":
            return commands.export_config(engine, sys.stdout.buffer, sub["sections"])
        with open(sub["output"], "wb") as handle:
            status = commands.export_config(engine, handle, sub["sections"])
        out.write(f"configuration written to {sub['output']}\n")
        return status
    if name == "import":
        plan = commands.import_config(engine, out, _read_document(sub["path"], stdin), "")
        if config["redis"]:
            fleet.announce(config["redis"], bool(plan["settings"]))
            out.write("running processes told to reload\n")
        else:
            out.write("no --redis: restart running processes to load it\n")
        return commands.OK
    assert name == "verify-ledger", name
    return commands.verify_ledger(engine, out)


def run(argv: list[str], out: IO[str] | None = None, err: IO[str] | None = None,
        stdin: IO[str] | None = None) -> int:
    """Run one command line; returns the exit status (what ``main`` exits with)."""
    out, err, stdin = out or sys.stdout, err or sys.stderr, stdin or sys.stdin
    config = AdminOptions()
    try:
        config.parseOptions(argv)
    except usage.UsageError as exc:
        err.write(f"{config}\nlockgate-admin: {exc}\n")
        return commands.REFUSED
    engine: Any = None
    try:
        engine, _threads = make_engine(config["database"], 1)
        return _dispatch(config, engine, out, stdin)
    except commands.Refused as exc:
        err.write(f"lockgate-admin {config.subCommand}: {exc}\n")
        return commands.REFUSED
    finally:
        if engine is not None:
            engine.dispose()


def main() -> None:
    sys.exit(run(sys.argv[1:]))
