"""The ``<int:...>`` converter of every console route map: ASCII digits, signed 64-bit bound.

werkzeug's own converter matches ``\\d+`` -- any Unicode decimal digit -- and hands any size of
integer to the handler, where an id past 2**63-1 overflowed the database driver (a 500, issue
15 finding 4).  This one matches ASCII digits only and turns an id that cannot fit a BIGINT
into ``UnusableId``, which ``json_route`` answers with a 400 naming the path field.
"""

from __future__ import annotations

from typing import Any

from werkzeug.routing import BaseConverter

#: the largest id the database can hold (signed 64-bit)
MAX_ID = (1 << 63) - 1


class UnusableId:
    """A path id that is all digits but does not fit the database."""

    def __init__(self, text: str) -> None:
        self.text = text


class IdConverter(BaseConverter):
    regex = r"[0-9]+"
    weight = 50
    part_isolating = True

    def to_python(self, value: str) -> Any:
        number = int(value)
        return number if number <= MAX_ID else UnusableId(value)

    def to_url(self, value: Any) -> str:
        return str(value)
