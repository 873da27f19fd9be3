"""The packages import from this checkout and twistd can find the ``lockgate`` plugin.

Guards the packaging facts in DESIGN.md: the repository root must be on ``sys.path`` (compat
editable install), and ``twisted/plugins`` must stay a namespace drop-in (no ``__init__.py``).
"""

from __future__ import annotations

import importlib
import os

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
