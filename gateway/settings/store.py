"""The settings every process reads from memory, refreshed when any node changes them.

Reads on the request path never touch the database: ``Settings`` holds the stored text of every
row.  A write goes through one transaction (all keys validated first, contract §5.4) and then a
``settings`` message on the shared bus makes every node reload.
"""

from __future__ import annotations

from collections.abc import Mapping
from decimal import Decimal
from typing import Any

import orjson

from gateway.settings.catalog import SPECS
from gateway.settings.catalog_update import plan_update
from gateway.settings.spec import parse_bool

BUS_CHANNEL = "lockgate:settings"


class Settings:
    """An in-memory snapshot of the settings table with typed getters.

    Typed values are parsed once per snapshot (the request path asks for the same flags on every
    call); ``replace`` installs a new snapshot and forgets them.
    """

    def __init__(self, values: Mapping[str, str] | None = None) -> None:
        self._values: dict[str, str] = dict(values or {})
        self._parsed: dict[tuple[str, str, object], Any] = {}

    def replace(self, values: Mapping[str, str]) -> None:
        self._values = dict(values)
        self._parsed = {}

    def raw(self, key: str) -> str | None:
        return self._values.get(key)

    def text(self, key: str) -> str:
        value = self._values.get(key)
        if value is None:
            spec = SPECS.get(key)
            return spec.default if spec else ""
        return value

    def flag(self, key: str) -> bool:
        memo = ("flag", key, None)
        try:
            return self._parsed[memo]  # type: ignore[no-any-return]
        except KeyError:
            spec = SPECS.get(key)
            default = parse_bool(spec.default, False) if spec else False
            value = self._parsed[memo] = parse_bool(self._values.get(key), default)
            return value

    def integer(self, key: str, fallback: int = 0) -> int:
        memo = ("integer", key, fallback)
        try:
            return self._parsed[memo]  # type: ignore[no-any-return]
        except KeyError:
            try:
                value = int(self.text(key))
            except ValueError:
                value = fallback
            self._parsed[memo] = value
            return value

    def decimal(self, key: str, fallback: Decimal = Decimal(0)) -> Decimal:
        memo = ("decimal", key, fallback)
        try:
            return self._parsed[memo]  # type: ignore[no-any-return]
        except KeyError:
            try:
                value = Decimal(self.text(key))
            except ArithmeticError:
                value = fallback
            self._parsed[memo] = value
            return value

    def json(self, key: str, fallback: Any = None) -> Any:
        text = self.text(key)
        if not text:
            return fallback
        try:
            return orjson.loads(text)
        except orjson.JSONDecodeError:
            return fallback

    def validate_update(self, body: Mapping[str, Any], *, node_name: str = "") -> dict[str, str]:
        """Check a PUT body and return the rows to write; raises SettingError, writes nothing."""
        return plan_update(body, self.raw, node_name=node_name)

