"""The hash of the web console's sources, so a test can tell a stale committed build.

``scripts/build_web.sh`` writes it to ``console/web/dist/source-hash.txt`` after building;
``tests/web/test_build_fresh.py`` recomputes it (no Node.js needed) and fails when a source,
the lockfile or the build config changed without a rebuild.  The hash covers every file under
``web/`` except ``node_modules`` and ``dist``, by relative path and content.
"""

from __future__ import annotations

import hashlib
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
WEB = ROOT / "web"
STAMP = ROOT / "console" / "web" / "dist" / "source-hash.txt"
SKIP = {"node_modules", "dist"}


def source_files(web: Path = WEB) -> list[Path]:
    return sorted(path for path in web.rglob("*")
                  if path.is_file() and not SKIP.intersection(path.relative_to(web).parts))


def source_hash(web: Path = WEB) -> str:
    digest = hashlib.sha256()
    for path in source_files(web):
        digest.update(path.relative_to(web).as_posix().encode() + b"\0")
        digest.update(hashlib.sha256(path.read_bytes()).digest())
    return digest.hexdigest()


if __name__ == "__main__":
    if sys.argv[1:] == ["--write"]:
        STAMP.write_text(source_hash() + "\n")
    print(source_hash())
