"""Agents contract §2.6: where a task's paths may point.

With a workspace, paths are relative and must resolve (symlinks followed, ``..`` collapsed)
inside the workspace root; without one the task is unrestricted and paths must be absolute.
Resolution uses the real path of every existing component, so a symlink inside the workspace
that points outside it is an escape like ``../``.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from connector.actions.outcome import ActionError


@dataclass(frozen=True)
class Workspace:
    """The root a task works in (``None`` = unrestricted) and the directory commands start in."""

    root: str | None
    default_dir: str

    @classmethod
    def for_task(cls, workspace_path: str, default_dir: str) -> Workspace:
        """Check a task's ``workspace_path`` (absolute, existing directory); empty: unrestricted."""
        if not workspace_path:
            return cls(root=None, default_dir=default_dir)
        if not os.path.isabs(workspace_path):
            raise ActionError("workspace path must be absolute")
        if not os.path.exists(workspace_path):
            raise ActionError(f"workspace path does not exist: {workspace_path}")
        if not os.path.isdir(workspace_path):
            raise ActionError(f"workspace path is not a directory: {workspace_path}")
        root = os.path.realpath(workspace_path)
        return cls(root=root, default_dir=root)

    @property
    def cwd(self) -> str:
        """Where commands run: the workspace root, else the device's default directory."""
        return self.root if self.root is not None else self.default_dir

    def resolve(self, path: str, *, empty_means_root: bool = False) -> str:
        """The real absolute path ``path`` names, or ``ActionError`` when the rules refuse it."""
        if "\x00" in path:
            raise ActionError("path must not contain NUL bytes")
        if not path:
            if empty_means_root:
                return self.cwd
            raise ActionError("path is required")
        if self.root is None:
            if not os.path.isabs(path):
                raise ActionError("path must be absolute when no workspace is selected")
            return os.path.realpath(path)
        if os.path.isabs(path):
            raise ActionError("path must be relative to the workspace")
        resolved = os.path.realpath(os.path.join(self.root, path))
        if resolved != self.root and not resolved.startswith(self.root + os.sep):
            raise ActionError("path escapes the workspace")
        return resolved

    def display(self, resolved: str) -> str:
        """How a resolved path is shown in results: relative to the root when there is one."""
        if self.root is None:
            return resolved
        relative = os.path.relpath(resolved, self.root)
        return "." if relative == "." else relative
