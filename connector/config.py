"""The programs' settings and their command line.

One dataclass for both programs; ``lockgate-sandboxd`` is the same program with ``mode`` fixed
to ``sandboxd``. The origin host command printed by Lockgate
(``app -server URL -token T -mode sandboxd -data-dir D``) parses as is: every long option also
answers to its single-dash spelling.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Sequence
from dataclasses import dataclass

from connector.capacity import Capacity, machine_capacity

TRANSPORTS = ("auto", "websocket", "longpoll")
MODES = ("platform", "web_server", "sandboxd")
RUNTIMES = ("bwrap", "docker")
TOKEN_ENV = "LOCKGATE_CONNECTOR_TOKEN"
UNPRIVILEGED_ID = 65534


@dataclass(frozen=True)
class ConnectorConfig:
    server_url: str
    token: str
    mode: str = "platform"
    name: str = ""
    default_dir: str = "."
    data_dir: str = "."
    max_parallel: int = 1
    transport: str = "auto"
    kind: str = "cli"
    listen_port: int = 0
    backoff_initial: float = 1.0
    backoff_max: float = 60.0
    ping_interval: float = 20.0
    poll_timeout: float = 35.0
    capacity: Capacity | None = None
    default_runtime: str = "bwrap"
    bwrap_path: str = "/usr/bin/bwrap"
    docker_path: str | None = None
    sandbox_uid: int | None = None
    sandbox_gid: int | None = None

    @property
    def sandboxd(self) -> bool:
        return self.mode == "sandboxd"

    @property
    def ws_url(self) -> str:
        base = self.server_url.rstrip("/")
        if base.startswith("https://"):
            base = "wss://" + base[len("https://") :]
        elif base.startswith("http://"):
            base = "ws://" + base[len("http://") :]
        return base + "/api/advanced-chat/connectors/ws"

    def api_url(self, path: str) -> str:
        return self.server_url.rstrip("/") + "/api/advanced-chat/connectors/" + path


def default_data_dir() -> str:
    """Root keeps sandboxes under /var/lib (root's home is closed to the sandbox user)."""
    if os.geteuid() == 0:
        return "/var/lib/lockgate-sandboxd"
    return os.path.expanduser("~/.lockgate-sandboxd")


def closed_ancestor(path: str) -> str | None:
    """The first directory on the way to ``path`` that other users cannot pass through."""
    current = os.path.sep
    for part in os.path.realpath(path).split(os.path.sep)[1:]:
        current = os.path.join(current, part)
        if not os.stat(current).st_mode & 0o001:
            return current
    return None


def _option(parser: argparse.ArgumentParser, name: str, **kwargs: object) -> None:
    parser.add_argument(f"--{name}", f"-{name}", **kwargs)  # type: ignore[arg-type]


def build_parser(sandboxd: bool) -> argparse.ArgumentParser:
    program = "lockgate-sandboxd" if sandboxd else "lockgate-connector"
    parser = argparse.ArgumentParser(
        prog=program,
        description=(
            "Run tasks for a Lockgate sandbox host (isolated per sandbox)."
            if sandboxd
            else "Link this machine to Lockgate as a connector device and run its tasks."
        ),
    )
    _option(parser, "server", required=True, help="Lockgate base URL, e.g. https://lockgate.example")
    _option(parser, "token", help=f"device/host token (wpc_…); default ${TOKEN_ENV}")
    _option(parser, "token-file", help="read the token from this file")
    modes = ("sandboxd",) if sandboxd else ("platform", "web_server")
    _option(parser, "mode", choices=modes, default=modes[0], help="device mode (advisory)")
    _option(parser, "name", default="", help="rename the device on connect")
    _option(parser, "max-parallel", type=int, default=1, help="tasks at once, 1..8 (default 1)")
    _option(parser, "transport", choices=TRANSPORTS, default="auto",
            help="auto: WebSocket, long-poll when the server has no WebSocket endpoint")
    _option(parser, "backoff-max", type=float, default=60.0, help="longest reconnect delay (s)")
    if sandboxd:
        _option(parser, "data-dir", default=default_data_dir(),
                help="sandboxes live in <data-dir>/sandboxes/<id>/work")
        _option(parser, "cpus", type=int, help="reported CPU cores (default: this machine's)")
        _option(parser, "memory-mb", type=int, help="reported memory (default: this machine's)")
        _option(parser, "disk-gb", type=int, help="reported disk (default: free space of data-dir)")
        _option(parser, "default-runtime", choices=RUNTIMES, default="bwrap",
                help="isolation when the host policy names no runtime (default bwrap)")
        _option(parser, "bwrap", default="/usr/bin/bwrap", help="bubblewrap executable")
        _option(parser, "docker", default=None, help="docker executable (default: on PATH)")
        _option(parser, "sandbox-uid", type=int, default=None,
                help=f"uid sandbox commands run as (default {UNPRIVILEGED_ID} when run as root)")
        _option(parser, "sandbox-gid", type=int, default=None, help="gid for sandbox commands")
    else:
        _option(parser, "default-dir", default=os.getcwd(),
                help="where commands of tasks without a workspace run (default: current dir)")
        _option(parser, "listen-port", type=int, default=0, help="web_server mode port")
    return parser


def parse_config(argv: Sequence[str], sandboxd: bool) -> ConnectorConfig:
    """Parse a command line into a config; argparse exits with a usage error on bad input."""
    parser = build_parser(sandboxd)
    args = parser.parse_args(list(argv))
    token = args.token or os.environ.get(TOKEN_ENV, "")
    if args.token_file:
        with open(args.token_file, encoding="utf-8") as handle:
            token = handle.read()
    token = token.strip()
    if not token:
        parser.error(f"a token is required (--token, --token-file or ${TOKEN_ENV})")
    if not 1 <= args.max_parallel <= 8:
        parser.error("--max-parallel must be between 1 and 8")
    if not args.server.startswith(("http://", "https://")):
        parser.error("--server must be an http:// or https:// URL")
    common = {
        "server_url": args.server,
        "token": token,
        "mode": args.mode,
        "name": args.name,
        "max_parallel": args.max_parallel,
        "transport": args.transport,
        "backoff_max": args.backoff_max,
    }
    if not sandboxd:
        return ConnectorConfig(
            **common, default_dir=os.path.abspath(args.default_dir), listen_port=args.listen_port
        )
    data_dir = os.path.abspath(args.data_dir)
    os.makedirs(os.path.join(data_dir, "sandboxes"), mode=0o755, exist_ok=True)
    measured = machine_capacity(data_dir)
    uid = args.sandbox_uid
    if uid is None and os.geteuid() == 0:
        uid = UNPRIVILEGED_ID
    gid = args.sandbox_gid if args.sandbox_gid is not None else uid
    closed = closed_ancestor(os.path.join(data_dir, "sandboxes")) if uid is not None else None
    if closed is not None:
        parser.error(
            f"the sandbox user (uid {uid}) cannot reach --data-dir {data_dir}: {closed} is not "
            "searchable by others (o+x); pick another --data-dir"
        )
    return ConnectorConfig(
        **common,
        data_dir=data_dir,
        default_dir=data_dir,
        capacity=Capacity(
            cpu_cores=args.cpus or measured.cpu_cores,
            memory_mb=args.memory_mb or measured.memory_mb,
            disk_gb=args.disk_gb or measured.disk_gb,
        ),
        default_runtime=args.default_runtime,
        bwrap_path=args.bwrap,
        docker_path=args.docker,
        sandbox_uid=uid,
        sandbox_gid=gid,
    )
