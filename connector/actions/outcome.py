"""What every action returns, and the one exception an action raises to refuse its input.

The fields are the result fields of agents contract §2.3/§2.4 (``success, result, stdout,
stderr, error, exit_code``), so a result goes on the wire without translation.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


class ActionError(Exception):
    """The action refused or failed; ``str(error)`` is the device's error text for the server."""


@dataclass(frozen=True)
class ActionResult:
    """One task's outcome, as sent in ``task_result`` (empty fields are left out)."""

    success: bool
    result: str = ""
    stdout: str = ""
    stderr: str = ""
    error: str = ""
    exit_code: int | None = None

    @classmethod
    def ok(cls, text: str) -> ActionResult:
        return cls(success=True, result=text)

    @classmethod
    def failed(cls, error: str) -> ActionResult:
        return cls(success=False, error=error)

    def wire_fields(self) -> dict[str, Any]:
        """The result fields of a ``task_result`` frame / the HTTP result body."""
        fields: dict[str, Any] = {"success": self.success}
        for name in ("result", "stdout", "stderr", "error"):
            value = getattr(self, name)
            if value:
                fields[name] = value
        if self.exit_code is not None:
            fields["exit_code"] = self.exit_code
        return fields
