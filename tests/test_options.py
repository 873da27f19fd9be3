"""``twistd lockgate`` option resolution: command line > LOCKGATE_* > --config TOML > default."""

from __future__ import annotations

import os
import shutil
import tempfile
from typing import Any

from twisted.python import usage
from twisted.trial.unittest import TestCase

from tap import options as tap_options
from tap.options import DEFAULT_DATABASE, DEFAULT_LISTEN, DEFAULT_SECRET_FILE, Options


class OptionsTests(TestCase):
    def setUp(self) -> None:
        self.environ: dict[str, str] = {}
        self.patch(os, "environ", self.environ)
        self.directory = tempfile.mkdtemp(prefix="lockgate-options-")
        self.addCleanup(shutil.rmtree, self.directory, True)

    def toml(self, text: str) -> str:
        path = os.path.join(self.directory, "lockgate.toml")
        with open(path, "w") as handle:
            handle.write(text)
        return path

    def parse(self, *args: str) -> dict[str, Any]:
        options = Options()
        options.parseOptions(list(args))
        return dict(options)

    def test_defaults(self) -> None:
        config = self.parse()
        assert config["database"] == DEFAULT_DATABASE
        assert config["secret-file"] == DEFAULT_SECRET_FILE
        assert config["listen"] == [DEFAULT_LISTEN]
        assert config["redis"] is None
        assert config["shutdown-grace"] == 10.0
        assert config["trusted-proxies"] == ""
        assert config["db-threads"] is None
        assert config["no-migrate"] is False

    def test_each_layer_overrides_the_one_below(self) -> None:
        path = self.toml(
            'database = "sqlite:///from-file.db"\n'
            'redis = "redis://file:6379/0"\n'
            'secret-file = "file.secret"\n'
            "shutdown-grace = 3\n"
            'listen = ["tcp:9001", "tcp:9002"]\n'
            "db-threads = 2\n"
            "no-migrate = true\n")
        from_file = self.parse("--config", path)
        assert from_file["database"] == "sqlite:///from-file.db"
        assert from_file["redis"] == "redis://file:6379/0"
        assert from_file["secret-file"] == "file.secret"
        assert from_file["shutdown-grace"] == 3.0
        assert from_file["listen"] == ["tcp:9001", "tcp:9002"]
        assert from_file["db-threads"] == 2
        assert from_file["no-migrate"] is True

        self.environ.update({
            "LOCKGATE_DATABASE": "sqlite:///from-env.db", "LOCKGATE_SHUTDOWN_GRACE": "4.5",
            "LOCKGATE_LISTEN": "tcp:9100 tcp:9101", "LOCKGATE_DB_THREADS": "3",
            "LOCKGATE_NO_MIGRATE": "0"})
        from_env = self.parse("--config", path)
        assert from_env["database"] == "sqlite:///from-env.db"
        assert from_env["shutdown-grace"] == 4.5
        assert from_env["listen"] == ["tcp:9100", "tcp:9101"]
        assert from_env["db-threads"] == 3
        assert from_env["no-migrate"] is False
        assert from_env["redis"] == "redis://file:6379/0"  # not in env: file still applies

        from_cli = self.parse("--config", path, "--database", "sqlite:///cli.db",
                              "--shutdown-grace", "0", "-l", "tcp:9200", "--db-threads", "4",
                              "--no-migrate")
        assert from_cli["database"] == "sqlite:///cli.db"
        assert from_cli["shutdown-grace"] == 0.0
        assert from_cli["listen"] == ["tcp:9200"]
        assert from_cli["db-threads"] == 4
        assert from_cli["no-migrate"] is True

    def test_config_path_from_environment(self) -> None:
        path = self.toml('trusted-proxies = "10.0.0.0/8"\nlisten = "tcp:9300"\n')
        self.environ["LOCKGATE_CONFIG"] = path
        config = self.parse()
        assert config["trusted-proxies"] == "10.0.0.0/8"
        assert config["listen"] == ["tcp:9300"]

    def test_repeatable_listen(self) -> None:
        config = self.parse("--listen", "tcp:1", "--listen", "unix:/tmp/x.sock")
        assert config["listen"] == ["tcp:1", "unix:/tmp/x.sock"]

    def test_unknown_toml_keys(self) -> None:
        path = self.toml('database = "sqlite:///x.db"\ndatabse = "typo"\n')
        with self.assertRaises(usage.UsageError) as caught:
            self.parse("--config", path)
        assert "databse" in str(caught.exception)

    def test_unreadable_or_invalid_toml(self) -> None:
        with self.assertRaises(usage.UsageError):
            self.parse("--config", os.path.join(self.directory, "missing.toml"))
        with self.assertRaises(usage.UsageError):
            self.parse("--config", self.toml("database = \n"))

    def test_bad_values(self) -> None:
        bad = [
            (("--shutdown-grace", "soon"), {}),
            (("--shutdown-grace", "-1"), {}),
            (("--db-threads", "0"), {}),
            (("--db-threads", "65"), {}),
            (("--db-threads", "two"), {}),
            ((), {"LOCKGATE_SHUTDOWN_GRACE": "x"}),
            ((), {"LOCKGATE_DB_THREADS": "1.5"}),
            (("--no-such-option",), {}),
        ]
        for args, env in bad:
            self.environ.clear()
            self.environ.update(env)
            with self.assertRaises(usage.UsageError, msg=repr((args, env))):
                self.parse(*args)

    def test_bad_toml_value_types(self) -> None:
        for text in ("listen = 5\n", "listen = [1, 2]\n", 'database = ["a"]\n',
                     "shutdown-grace = true\n", 'db-threads = "many"\n',
                     'no-migrate = "perhaps"\n', "redis = {}\n"):
            with self.assertRaises(usage.UsageError, msg=text):
                self.parse("--config", self.toml(text))

    def test_resolve_works_on_plain_dicts(self) -> None:
        config: dict[str, Any] = {"database": "sqlite:///cli.db"}
        tap_options.resolve(config, {"LOCKGATE_DATABASE": "ignored",
                                     "LOCKGATE_REDIS": "redis://env:6379/1"})
        assert config["database"] == "sqlite:///cli.db"
        assert config["redis"] == "redis://env:6379/1"
        assert config["listen"] == [DEFAULT_LISTEN]


class NodeNameOptionTests(OptionsTests):
    def test_node_name_from_each_layer(self) -> None:
        assert self.parse()["node-name"] == ""
        path = self.toml('node-name = "from-file"\n')
        assert self.parse("--config", path)["node-name"] == "from-file"
        self.environ["LOCKGATE_NODE_NAME"] = " from-env "
        assert self.parse("--config", path)["node-name"] == "from-env"
        assert self.parse("--node-name", "cli")["node-name"] == "cli"
