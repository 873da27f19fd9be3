"""Lockgate's version as ``--version`` prints it: the package release and the build.

The release comes from the installed distribution's metadata (``setup.cfg``); the build is the
one ``GET /api/updates`` reports (``dev`` for a local build), so an operator can match a
process to its release notes and to what the console says.
"""

from __future__ import annotations

from importlib import metadata

from console.routes.updates import BUILD_VERSION


def release() -> str:
    try:
        return metadata.version("lockgate")
    except metadata.PackageNotFoundError:
        return "unknown"


def version_line() -> str:
    return f"Lockgate {release()} (build {BUILD_VERSION})"
