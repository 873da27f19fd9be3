"""A real ``twistd -n lockgate`` process for tests about signals, drains and fleets.

``LockgateNode`` starts the installed plugin on a free loopback port against a given database
URL (SQLite file or PostgreSQL) and optionally a Redis URL, waits for ``/healthz`` with a bound,
and talks to it with blocking ``http.client`` calls (run them in threads to overlap them).
``provision()`` makes what a first call needs through the console API, as an operator would:
setup, a user channel, a channel on the given upstream, a model with prices, its channel model
config, a balance and an API key.  ``ledger_view()`` reads the money tables afterwards.
"""

from __future__ import annotations

import http.client
import json
import os
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from typing import Any

import sqlalchemy

TWISTD = os.path.join(os.path.dirname(sys.executable), "twistd")
#: prices per 1M tokens: 1000 per 1M input = 0.001 per input token; 2000 per 1M output
INPUT_PRICE = "1000"
OUTPUT_PRICE = "2000"
MODEL = "gpt-drain"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def clean_environment() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith("LOCKGATE_")}


@dataclass
class Answer:
    status: int
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)


class LockgateNode:
    def __init__(self, directory: str, database: str, *extra: str, name: str = "node",
                 port: int | None = None, secret_file: str | None = None) -> None:
        self.directory = directory
        self.database = database
        self.extra = extra
        self.port = port or free_port()
        self.secret_file = secret_file or os.path.join(directory, "secret")
        self.output_path = os.path.join(directory, f"{name}.log")
        self._output = open(self.output_path, "ab")  # noqa: SIM115 - closed in wait()
        self.process = subprocess.Popen(
            [TWISTD, "--pidfile=", "-n", "lockgate",
             "--listen", f"tcp:{self.port}:interface=127.0.0.1",
             "--database", database, "--secret-file", self.secret_file, *extra],
            cwd=directory, stdout=self._output, stderr=subprocess.STDOUT,
            env=clean_environment(),
        )

    def output(self) -> str:
        with open(self.output_path, "rb") as handle:
            return handle.read().decode(errors="replace")

    # --- HTTP -------------------------------------------------------------------------------

    def request(self, method: str, path: str, body: Any = None, *, token: str | None = None,
                timeout: float = 30) -> Answer:
        connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
        try:
            headers = {"Content-Type": "application/json"}
            if token:
                headers["Authorization"] = f"Bearer {token}"
            payload = json.dumps(body).encode() if body is not None else None
            connection.request(method, path, body=payload, headers=headers)
            response = connection.getresponse()
            data = response.read()
            return Answer(response.status, {k.lower(): v for k, v in response.getheaders()},
                          data)
        finally:
            connection.close()

    def ok(self, method: str, path: str, body: Any = None, *, token: str | None = None
           ) -> Any:
        answer = self.request(method, path, body, token=token)
        assert answer.status == 200, (method, path, answer, self.output()[-3000:])
        return answer.json() if answer.body else None

    def wait_until_healthy(self, within: float = 60.0) -> None:
        deadline = time.monotonic() + within
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise AssertionError(f"twistd exited early ({self.process.returncode}):\n"
                                     + self.output())
            try:
                if self.request("GET", "/healthz", timeout=2).status == 200:
                    return
            except OSError:
                pass
            time.sleep(0.1)
        raise AssertionError("twistd did not become healthy in time:\n" + self.output())

    # --- lifecycle ----------------------------------------------------------------------------

    def terminate(self) -> None:
        self.process.send_signal(signal.SIGTERM)

    def wait(self, timeout: float) -> int:
        try:
            return self.process.wait(timeout=timeout)
        finally:
            self._output.close()

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()
        self._output.close()

    # --- provisioning -------------------------------------------------------------------------

    def provision(self, upstream_base_url: str, *, balance: str = "100") -> Provisioned:
        setup = self.ok("POST", "/api/setup", {
            "username": "root", "email": "root@example.com", "password": "password123"})
        token = setup["token"]
        user_id = setup["user"]["id"]
        self.ok("PUT", "/api/settings", {"ssrf_allow_private_networks": True}, token=token)
        user_channel = self.ok("POST", "/api/user-channels", {"name": "standard"}, token=token)
        channel = self.ok("POST", "/api/channels", {
            "name": "slow", "type": "compat", "base_url": upstream_base_url,
            "api_key": "sk-upstream", "user_channel_id": user_channel["id"]}, token=token)
        model = self.ok("POST", "/api/models", {
            "model_name": MODEL, "input_price": INPUT_PRICE, "output_price": OUTPUT_PRICE},
            token=token)
        self.ok("POST", f"/api/channels/{channel['id']}/models", {"model_id": model["id"]},
                token=token)
        self.ok("PUT", f"/api/users/{user_id}", {"balance": balance}, token=token)
        key = self.ok("POST", "/api/user/api-keys", {"name": "drain"}, token=token)
        return Provisioned(admin_token=token, user_id=user_id, api_key=key["api_key"],
                           key_id=key["id"])


@dataclass(frozen=True)
class Provisioned:
    admin_token: str
    user_id: int
    api_key: str
    key_id: int


def chat(node: LockgateNode, api_key: str, *, stream: bool, timeout: float = 60) -> Answer:
    return node.request("POST", "/v1/chat/completions", {
        "model": MODEL, "stream": stream, "max_tokens": 50,
        "messages": [{"role": "user", "content": "count slowly please"}]},
        token=api_key, timeout=timeout)


@dataclass(frozen=True)
class LedgerView:
    """The money tables as the database holds them (after the process committed)."""

    usage: list[dict[str, Any]]
    ledger_sum_nanos: int
    balance_nanos: int
    key_used_nanos: int


def ledger_view(database: str, user_id: int, key_id: int) -> LedgerView:
    from gateway.store import schema

    engine = sqlalchemy.create_engine(database)
    try:
        with engine.connect() as conn:
            usage = [dict(r) for r in conn.execute(
                sqlalchemy.select(schema.usage_logs).order_by(schema.usage_logs.c.id)
            ).mappings()]
            ledger_sum = conn.execute(sqlalchemy.select(
                sqlalchemy.func.coalesce(sqlalchemy.func.sum(schema.ledger.c.amount_nanos), 0))
                .where(schema.ledger.c.user_id == user_id)).scalar_one()
            balance = conn.execute(sqlalchemy.select(schema.users.c.balance_nanos)
                                   .where(schema.users.c.id == user_id)).scalar_one()
            used = conn.execute(sqlalchemy.select(schema.api_keys.c.spent_nanos)
                                .where(schema.api_keys.c.id == key_id)).scalar_one()
    finally:
        engine.dispose()
    return LedgerView(usage, int(ledger_sum), int(balance), int(used))
