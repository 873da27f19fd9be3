"""The packages import from this checkout and twistd can find the ``lockgate`` plugin.

Guards the packaging facts in DESIGN.md: the repository root must be on ``sys.path`` (the
editable install), ``twisted/plugins`` must stay a namespace drop-in (no ``__init__.py``), and an
operator who installs Lockgate as a package -- a built wheel, ``pip install .`` or a default-mode
``pip install -e .`` -- gets ``twistd lockgate`` and the migrations.
"""

from __future__ import annotations

import importlib
import os
import shutil
import subprocess
import sys
import tempfile
import venv
import zipfile

from twisted.application.service import IServiceMaker
from twisted.plugin import getPlugins
from twisted.trial.unittest import TestCase

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


class PackagingTests(TestCase):
    def test_packages_import_from_this_repository(self) -> None:
        for name in ("tap", "gateway", "console"):
            module = importlib.import_module(name)
            assert module.__file__ is not None
            path = os.path.realpath(module.__file__)
            assert path.startswith(os.path.realpath(REPO) + os.sep), (name, path)

    def test_plugin_directory_has_no_init(self) -> None:
        assert os.path.isfile(os.path.join(REPO, "twisted", "plugins", "lockgate.py"))
        for folder in ("twisted", os.path.join("twisted", "plugins")):
            assert not os.path.exists(os.path.join(REPO, folder, "__init__.py")), folder

    def test_plugin_is_discoverable(self) -> None:
        import twisted.plugins

        makers = {maker.tapname: maker for maker in getPlugins(IServiceMaker, twisted.plugins)}
        assert "lockgate" in makers, sorted(makers)
        maker = makers["lockgate"]
        assert maker.module == "tap.service"
        assert maker.options().__class__.__module__ == "tap.options"
        plugin_dirs = [os.path.realpath(p) for p in twisted.plugins.__path__]
        assert os.path.realpath(os.path.join(REPO, "twisted", "plugins")) in plugin_dirs


_NOT_SOURCES = (".venv", ".git", "__pycache__", "*.egg-info", "build", "dist", "dropin.cache",
                "*.sqlite3*", ".mypy_cache", ".ruff_cache", ".hypothesis", "_trial_temp*",
                "node_modules")


def _pip(*args: str, python: str = sys.executable) -> None:
    """Runs this interpreter's pip; nothing is fetched (no index, no build isolation)."""
    subprocess.run([sys.executable, "-m", "pip", "--python", python, "--disable-pip-version-check",
                    "--no-input", "-q", *args, "--no-deps", "--no-index", "--no-build-isolation"],
                   check=True, capture_output=True, timeout=300)


def _site_packages() -> str:
    import twisted

    return os.path.dirname(os.path.dirname(os.path.realpath(twisted.__file__)))


class InstalledPackageTests(TestCase):
    """Builds and installs the project the way an operator would, into throw-away places."""

    def setUp(self) -> None:
        self.tmp = tempfile.mkdtemp(prefix="lockgate-pkg-")
        self.addCleanup(shutil.rmtree, self.tmp, True)

    def _copy_of_checkout(self) -> str:
        """The sources alone: a build writes build/ and *.egg-info next to them."""
        src = os.path.join(self.tmp, "src")
        shutil.copytree(REPO, src, ignore=shutil.ignore_patterns(*_NOT_SOURCES))
        return src

    def _wheel(self) -> str:
        out = os.path.join(self.tmp, "wheel")
        src = self._copy_of_checkout()
        subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-index",
                        "--no-build-isolation", "-w", out, src],
                       check=True, capture_output=True, timeout=300)
        [name] = os.listdir(out)
        return os.path.join(out, name)

    def _fresh_venv(self) -> str:
        """A new virtualenv that sees this one's dependencies but not this checkout."""
        home = os.path.join(self.tmp, "venv")
        venv.create(home, with_pip=False)
        python = os.path.join(home, "bin", "python")
        site = subprocess.run([python, "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
                              check=True, capture_output=True, text=True).stdout.strip()
        # a path entry, not a site dir: the checkout's editable .pth in there is not processed
        with open(os.path.join(site, "zz_dependencies.pth"), "w") as f:
            f.write(_site_packages() + "\n")
        return python

    def _twistd_help(self, python: str) -> tuple[str, str]:
        code = ("import sys, tap; from twisted.scripts.twistd import run; "
                "print('TAP=' + tap.__file__, file=sys.stderr); sys.argv[0] = 'twistd'; run()")
        env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
        done = subprocess.run([python, "-c", code, "lockgate", "--help"], cwd=self.tmp, env=env,
                              capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr[-2000:]
        tap_file = done.stderr.split("TAP=", 1)[1].splitlines()[0]
        return done.stdout, tap_file

    def test_wheel_carries_the_plugin_and_the_migrations(self) -> None:
        with zipfile.ZipFile(self._wheel()) as wheel:
            names = set(wheel.namelist())
            [entry_points] = [n for n in names if n.endswith("entry_points.txt")]
            scripts = wheel.read(entry_points).decode()
        assert "twisted/plugins/lockgate.py" in names
        assert "twisted/__init__.py" not in names
        assert "twisted/plugins/__init__.py" not in names
        assert "gateway/store/migrations/env.py" in names
        assert any(n.startswith("gateway/store/migrations/versions/0001_") for n in names)
        assert not any(n.startswith(("tests/", "bench/", "scripts/")) for n in names)
        assert "connector/main.py" in names and "connector/isolation/bubblewrap.py" in names
        assert "lockgate-connector = connector.main:connector_main" in scripts
        assert "lockgate-sandboxd = connector.main:sandboxd_main" in scripts

    def test_wheel_installed_into_a_fresh_virtualenv_provides_twistd_lockgate(self) -> None:
        wheel = self._wheel()
        python = self._fresh_venv()
        _pip("install", wheel, python=python)
        usage, tap_file = self._twistd_help(python)
        assert "--database" in usage and "--listen" in usage
        assert not os.path.realpath(tap_file).startswith(os.path.realpath(REPO) + os.sep)

    def test_default_mode_editable_install_provides_twistd_lockgate(self) -> None:
        src = self._copy_of_checkout()
        python = self._fresh_venv()
        _pip("install", "-e", src, python=python)
        usage, tap_file = self._twistd_help(python)
        assert "--database" in usage
        assert os.path.realpath(tap_file) == os.path.realpath(os.path.join(src, "tap", "__init__.py"))
