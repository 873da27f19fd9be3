"""The built console in memory: ``index.html`` and the hashed assets, each with its gzip form.

The files come from ``dist/`` next to this module (package data, built by
``scripts/build_web.sh``; no Node.js at run time).  They are small, so they are read once and
compressed once at start-up: every answer is then a dictionary lookup, and the compressed size
a browser downloads is what the bundle budget measures.
"""

from __future__ import annotations

import gzip
import mimetypes
import re
from dataclasses import dataclass
from pathlib import Path

DIST = Path(__file__).resolve().parent / "dist"
#: one path segment of a built asset: letters, digits, ``.``, ``-``, ``_`` (no ``..``)
ASSET_NAME = re.compile(r"^[A-Za-z0-9_-][A-Za-z0-9._-]*$")
CONTENT_TYPES = {
    ".js": "text/javascript; charset=utf-8",
    ".mjs": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".html": "text/html; charset=utf-8",
    ".json": "application/json",
    ".svg": "image/svg+xml",
    ".png": "image/png",
    ".ico": "image/x-icon",
    ".woff2": "font/woff2",
    ".txt": "text/plain; charset=utf-8",
}
#: compressing tiny or already-compressed files gains nothing
COMPRESSIBLE = {".js", ".mjs", ".css", ".html", ".json", ".svg", ".txt"}
MIN_COMPRESS = 256


@dataclass(frozen=True)
class BuiltFile:
    body: bytes
    gzipped: bytes | None
    content_type: str


def content_type(name: str) -> str:
    suffix = Path(name).suffix.lower()
    return CONTENT_TYPES.get(suffix) or mimetypes.guess_type(name)[0] or "application/octet-stream"


def built_file(path: Path) -> BuiltFile:
    body = path.read_bytes()
    gzipped = None
    if path.suffix.lower() in COMPRESSIBLE and len(body) >= MIN_COMPRESS:
        packed = gzip.compress(body, compresslevel=9, mtime=0)
        gzipped = packed if len(packed) < len(body) else None
    return BuiltFile(body, gzipped, content_type(path.name))


@dataclass(frozen=True)
class ConsoleBuild:
    index: BuiltFile
    assets: dict[str, BuiltFile]

    @classmethod
    def load(cls, root: Path = DIST) -> ConsoleBuild:
        """Read ``root/index.html`` and every file of ``root/assets``; missing build is an
        error at start-up, not a blank page later."""
        index = root / "index.html"
        if not index.is_file():
            raise FileNotFoundError(f"the web console is not built: {index} is missing "
                                    "(run scripts/build_web.sh)")
        assets: dict[str, BuiltFile] = {}
        folder = root / "assets"
        if folder.is_dir():
            for path in sorted(folder.iterdir()):
                if path.is_file() and ASSET_NAME.match(path.name):
                    assets[path.name] = built_file(path)
        return cls(built_file(index), assets)
