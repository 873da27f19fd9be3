"""The workspace file actions of agents contract §2.7: list, read, hash, write, replace.

Every path goes through ``Workspace.resolve`` first (§2.6), sizes are capped as the catalog
says, and writes go to a temporary file renamed into place so a reader never sees half a file
and a symlink at the target is replaced, never followed.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from collections.abc import Callable
from typing import Any

from connector.actions.outcome import ActionError, ActionResult
from connector.workspace import Workspace

LIST_DEFAULT_ENTRIES = 100
LIST_MAX_ENTRIES = 500
READ_DEFAULT_BYTES = 120_000
READ_MAX_BYTES = 200_000
WRITE_MAX_BYTES = 8 * 1024 * 1024

# Called with every path a write created, so a sandbox host can hand it to the sandbox's user.
Chown = Callable[[str], None]


def bounded_int(payload: dict[str, Any], key: str, default: int, maximum: int) -> int:
    """``payload[key]`` as an int in 1..maximum; missing or < 1 means the default."""
    value = payload.get(key)
    if value is None or value == "":
        return default
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise ActionError(f"{key} must be a number")
    try:
        number = int(value)
    except ValueError as exc:
        raise ActionError(f"{key} must be a number") from exc
    if number < 1:
        return default
    return min(number, maximum)


def text_field(payload: dict[str, Any], key: str, *, required: bool = True) -> str:
    value = payload.get(key, "")
    if value is None:
        value = ""
    if not isinstance(value, str):
        raise ActionError(f"{key} must be a string")
    if required and not value:
        raise ActionError(f"{key} is required")
    return value


def list_files(workspace: Workspace, payload: dict[str, Any]) -> ActionResult:
    """One line per entry, directories first-class with a trailing ``/``, sorted by name."""
    target = workspace.resolve(text_field(payload, "path", required=False), empty_means_root=True)
    limit = bounded_int(payload, "max_entries", LIST_DEFAULT_ENTRIES, LIST_MAX_ENTRIES)
    if not os.path.isdir(target):
        raise ActionError(f"not a directory: {workspace.display(target)}")
    with os.scandir(target) as entries:
        listed = sorted(entries, key=lambda entry: entry.name)
    lines = []
    for entry in listed[:limit]:
        if entry.is_dir(follow_symlinks=False):
            lines.append(f"{entry.name}/")
        elif entry.is_symlink():
            lines.append(f"{entry.name} -> {os.readlink(entry.path)}")
        else:
            lines.append(f"{entry.name} ({entry.stat(follow_symlinks=False).st_size} bytes)")
    if len(listed) > limit:
        lines.append(f"... ({len(listed) - limit} more entries)")
    if not lines:
        return ActionResult.ok(f"{workspace.display(target)} is empty")
    return ActionResult.ok("\n".join(lines))


def read_file(workspace: Workspace, payload: dict[str, Any]) -> ActionResult:
    """The file's text (UTF-8, undecodable bytes replaced), cut at ``max_bytes``."""
    target = workspace.resolve(text_field(payload, "path"))
    limit = bounded_int(payload, "max_bytes", READ_DEFAULT_BYTES, READ_MAX_BYTES)
    _require_file(workspace, target)
    with open(target, "rb") as handle:
        data = handle.read(limit + 1)
    text = data[:limit].decode("utf-8", errors="replace")
    if len(data) > limit:
        text += f"\n...(truncated at {limit} bytes)"
    return ActionResult.ok(text)


def file_sha256(workspace: Workspace, payload: dict[str, Any]) -> ActionResult:
    """The lowercase hex SHA-256 of the whole file, read in blocks."""
    target = workspace.resolve(text_field(payload, "path"))
    _require_file(workspace, target)
    digest = hashlib.sha256()
    with open(target, "rb") as handle:
        for block in iter(lambda: handle.read(1024 * 1024), b""):
            digest.update(block)
    return ActionResult.ok(digest.hexdigest())


def write_file(
    workspace: Workspace, payload: dict[str, Any], chown: Chown | None = None
) -> ActionResult:
    """Write ``content``; refuses to replace a file unless ``overwrite``, or to make directories
    unless ``create_dirs``."""
    target = workspace.resolve(text_field(payload, "path"))
    content = text_field(payload, "content", required=False)
    data = content.encode("utf-8")
    if len(data) > WRITE_MAX_BYTES:
        raise ActionError(f"content is larger than {WRITE_MAX_BYTES} bytes")
    shown = workspace.display(target)
    if os.path.isdir(target):
        raise ActionError(f"path is a directory: {shown}")
    if os.path.lexists(target) and not payload.get("overwrite"):
        raise ActionError(f"file already exists: {shown} (set overwrite to replace it)")
    parent = os.path.dirname(target)
    if not os.path.isdir(parent):
        if not payload.get("create_dirs"):
            raise ActionError(f"parent directory does not exist: {workspace.display(parent)}")
        for created in _make_dirs(parent):
            if chown is not None:
                chown(created)
    _write_atomically(target, data, chown)
    return ActionResult.ok(f"Wrote {len(data)} bytes to {shown}")


def replace_text(
    workspace: Workspace, payload: dict[str, Any], chown: Chown | None = None
) -> ActionResult:
    """Exact-text replacement: ``old_text`` must occur exactly once. With ``replacements[]``
    ([P-23]) every pair applies in order to the result of the previous one, all or nothing."""
    target = workspace.resolve(text_field(payload, "path"))
    _require_file(workspace, target)
    shown = workspace.display(target)
    pairs = _replacement_pairs(payload)
    with open(target, "rb") as handle:
        raw = handle.read()
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ActionError(f"file is not UTF-8 text: {shown}") from exc
    for index, (old, new) in enumerate(pairs, start=1):
        label = f"replacement {index}: " if len(pairs) > 1 else ""
        count = text.count(old)
        if count == 0:
            raise ActionError(f"{label}old_text not found in {shown}")
        if count > 1:
            raise ActionError(
                f"{label}old_text occurs {count} times in {shown}; it must be unique"
            )
        text = text.replace(old, new, 1)
    _write_atomically(target, text.encode("utf-8"), chown, mode=os.stat(target).st_mode)
    noun = "replacement" if len(pairs) == 1 else "replacements"
    return ActionResult.ok(f"Applied {len(pairs)} {noun} to {shown}")


def _replacement_pairs(payload: dict[str, Any]) -> list[tuple[str, str]]:
    replacements = payload.get("replacements")
    if replacements is None:
        return [(text_field(payload, "old_text"), text_field(payload, "new_text", required=False))]
    if not isinstance(replacements, list) or not replacements:
        raise ActionError("replacements must be a non-empty array")
    pairs = []
    for item in replacements:
        if not isinstance(item, dict):
            raise ActionError("each replacement must be an object with old_text and new_text")
        pairs.append((text_field(item, "old_text"), text_field(item, "new_text", required=False)))
    return pairs


def _require_file(workspace: Workspace, target: str) -> None:
    if not os.path.exists(target):
        raise ActionError(f"file not found: {workspace.display(target)}")
    if not os.path.isfile(target):
        raise ActionError(f"not a regular file: {workspace.display(target)}")


def _make_dirs(directory: str) -> list[str]:
    """``os.makedirs`` that says which directories it created (outermost first)."""
    missing = []
    probe = directory
    while not os.path.isdir(probe):
        missing.append(probe)
        probe = os.path.dirname(probe)
    os.makedirs(directory, exist_ok=True)
    return list(reversed(missing))


def _write_atomically(target: str, data: bytes, chown: Chown | None, mode: int = 0o644) -> None:
    directory = os.path.dirname(target)
    handle, temporary = tempfile.mkstemp(prefix=".lockgate-", dir=directory)
    try:
        with os.fdopen(handle, "wb") as stream:
            stream.write(data)
        os.chmod(temporary, mode & 0o7777)
        if chown is not None:
            chown(temporary)
        os.replace(temporary, target)
    except BaseException:
        if os.path.exists(temporary):
            os.unlink(temporary)
        raise
