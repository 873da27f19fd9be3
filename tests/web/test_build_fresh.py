"""The committed console build matches the committed sources (no Node.js needed to check).

``scripts/build_web.sh`` stamps ``console/web/dist/source-hash.txt`` with the hash of every file
under ``web/`` (sources, ``package-lock.json``, build config); a source edited without a rebuild
fails here.  The build also has to be complete: every asset ``index.html`` names is present.
"""

from __future__ import annotations

import importlib.util
import re
import shutil
import tempfile
from pathlib import Path
from types import ModuleType

from twisted.trial.unittest import TestCase

from console.web.build import DIST, ConsoleBuild

ROOT = Path(__file__).resolve().parents[2]


def hash_script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("web_source_hash",
                                                  ROOT / "scripts" / "web_source_hash.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class BuildFreshnessTests(TestCase):
    def test_stamp_matches_the_sources(self) -> None:
        script = hash_script()
        stamp = (DIST / "source-hash.txt").read_text().strip()
        assert stamp == script.source_hash(), (
            "console/web/dist is stale: run scripts/build_web.sh and commit the result")

    def test_hash_changes_with_any_source(self) -> None:
        script = hash_script()
        web = Path(tempfile.mkdtemp(prefix="lockgate-web-hash-"))
        self.addCleanup(shutil.rmtree, web, True)
        (web / "src").mkdir(parents=True)
        (web / "node_modules").mkdir()
        (web / "src" / "main.tsx").write_text("export {};\n")
        (web / "package-lock.json").write_text("{}\n")
        first = script.source_hash(web)
        (web / "node_modules" / "ignored.js").write_text("x")
        assert script.source_hash(web) == first
        (web / "package-lock.json").write_text('{"lockfileVersion": 3}\n')
        assert script.source_hash(web) != first

    def test_index_names_only_built_assets(self) -> None:
        build = ConsoleBuild.load()
        named = re.findall(r'(?:src|href)="/assets/([^"]+)"', build.index.body.decode())
        assert named and set(named) <= set(build.assets), (named, sorted(build.assets))

    def test_first_load_is_within_budget(self) -> None:
        build = ConsoleBuild.load()
        named = re.findall(r'(?:src|href)="/assets/([^"]+)"', build.index.body.decode())
        sizes = [len(build.index.gzipped or build.index.body)]
        sizes += [len(build.assets[name].gzipped or build.assets[name].body) for name in named]
        assert sum(sizes) <= 250 * 1024, sizes
