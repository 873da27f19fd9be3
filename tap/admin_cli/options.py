"""Command line of ``lockgate-admin``: the twistd options it shares, one subcommand each."""

from __future__ import annotations

import os
import sys
from typing import Any

from twisted.python import usage

from console.services.settings.transfer import SECTIONS
from tap.options import DEFAULT_DATABASE, DEFAULT_SECRET_FILE, resolve
from tap.version import version_line

_PASSWORD_FILE = ["password-file", "p", None,
                  "Read the new password from this file (first line); default: prompt twice, "
                  "or the first line of standard input when it is not a terminal."]


def _arguments(args: tuple[str, ...], *names: str) -> dict[str, str]:
    if len(args) != len(names):
        raise usage.UsageError(f"expected {' '.join('<' + n + '>' for n in names)}, "
                               f"got {len(args)} argument(s)")
    return dict(zip(names, args, strict=True))


class ResetPassword(usage.Options):
    synopsis = "[options] <username | email | id>"
    longdesc = ("Set a user's password and sign out all of their sessions (their JWTs stop "
                "working). Use it when the last administrator is locked out.")
    optParameters = [_PASSWORD_FILE]

    def parseArgs(self, *args: str) -> None:
        self.update(_arguments(args, "user"))


class CreateAdmin(usage.Options):
    synopsis = "[options] <username> <email>"
    longdesc = ("Create an administrator. When first-run setup is still pending it is marked "
                "done, so nobody else can claim the instance through POST /api/setup.")
    optParameters = [_PASSWORD_FILE]

    def parseArgs(self, *args: str) -> None:
        self.update(_arguments(args, "username", "email"))


class Migrate(usage.Options):
    longdesc = "Apply every pending database migration (twistd does this on start too)."


class Check(usage.Options):
    longdesc = ("Report the database, its schema revision against this version's, whether "
                "first-run setup is pending, and where the secret file is. Exit status 1 "
                "when migrations are pending.")


class Export(usage.Options):
    longdesc = ("Write the configuration (settings, channels, models, prices) as the JSON "
                "document of POST /api/settings/export. It holds secrets in clear.")
    optParameters = [["output", "o", "-", "File to write ('-': standard output)."]]

    def __init__(self) -> None:
        super().__init__()
        self["sections"] = []

    def opt_section(self, name: str) -> None:
        """A section to export (repeatable; default all): system_settings, channels,
        model_data, model_prices."""
        if name.strip().lower() not in SECTIONS:
            raise usage.UsageError(f"unknown section {name!r}; one of {', '.join(SECTIONS)}")
        self["sections"].append(name.strip().lower())


class Import(usage.Options):
    synopsis = "<file | ->"
    longdesc = ("Apply a configuration document (as POST /api/settings/import does: all or "
                "nothing, validated first). With --redis, running processes reload at once.")

    def parseArgs(self, *args: str) -> None:
        self.update(_arguments(args, "path"))


class VerifyLedger(usage.Options):
    longdesc = ("Recompute every balance and API-key quota from the ledger and the usage logs "
                "and list each difference. Exit status 1 when there is any.")


class AdminOptions(usage.Options):
    """``lockgate-admin [options] <command> [command options]``."""

    synopsis = "Usage: lockgate-admin [options] <command> [command options]"
    longdesc = ("Operator tools for a Lockgate database. Options and LOCKGATE_* variables are "
                "those of 'twistd lockgate'. Run 'lockgate-admin <command> --help' for more.")
    optParameters = [
        ["database", "d", None, f"SQLAlchemy database URL (default {DEFAULT_DATABASE})."],
        ["secret-file", "s", None, f"The secret file (default {DEFAULT_SECRET_FILE})."],
        ["config", "c", None, "TOML file of 'twistd lockgate' options."],
        ["redis", "r", None, "Redis URL of the fleet (to tell running processes to reload)."],
    ]
    subCommands = [
        ["reset-password", None, ResetPassword, "Set a user's password; end their sessions."],
        ["create-admin", None, CreateAdmin, "Create an administrator."],
        ["migrate", None, Migrate, "Apply pending database migrations."],
        ["check", None, Check, "Show the schema status, setup state and file locations."],
        ["export", None, Export, "Write the configuration as JSON."],
        ["import", None, Import, "Apply a configuration JSON document."],
        ["verify-ledger", None, VerifyLedger, "Recompute balances and key quotas; report "
         "differences."],
    ]

    def opt_version(self) -> None:
        """Print Lockgate's version and exit."""
        print(version_line())
        sys.exit(0)

    def postOptions(self) -> None:
        if self.subCommand is None:
            raise usage.UsageError("a command is required")
        settings: dict[str, Any] = {name: self[name] for name in
                                    ("database", "secret-file", "config", "redis")}
        resolve(settings, os.environ)
        for name in ("database", "secret-file", "redis"):
            self[name] = settings[name]
