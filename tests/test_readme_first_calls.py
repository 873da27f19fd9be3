"""README.md's "First calls" run as written, so the newcomer's crib sheet cannot rot.

The ``sh`` block of that section runs in bash (``curl`` + ``jq``) against a real Lockgate on
a loopback port whose upstream channel points at the fake OpenAI-compatible upstream; the
``python`` block then runs in a fresh interpreter with the official ``openai`` SDK.  The test
checks what the newcomer would: the SDK printed the answer, the upstream got the channel key,
and the call is in the usage log with its cost.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

from twisted.internet.threads import deferToThread

from tests.gateway.gateway_case import GatewayTestCase

README = Path(__file__).resolve().parent.parent / "README.md"
UPSTREAM_KEY = "sk-upstream-readme-test"


def first_calls() -> tuple[str, str]:
    """The section's shell block and Python block, verbatim."""
    text = README.read_text(encoding="utf-8")
    start = text.index("## First calls")
    end = text.index("\n## ", start + 1)
    section = text[start:end]
    shell = re.findall(r"```sh\n(.*?)```", section, re.S)
    python = re.findall(r"```python\n(.*?)```", section, re.S)
    assert len(shell) == 1 and len(python) == 1, "First calls: one sh and one python block"
    return shell[0], python[0]


def _run(argv: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, env=env, capture_output=True, text=True, timeout=120,
                          check=False)


class ReadmeFirstCallsTests(GatewayTestCase):
    async def test_the_first_calls_work_as_written(self) -> None:
        if shutil.which("jq") is None or shutil.which("curl") is None:
            self.skipTest("the README's first calls need curl and jq")
        shell, python = first_calls()
        env: dict[str, Any] = {"PATH": os.environ["PATH"], "BASE": self.base,
                               "UPSTREAM_URL": self.fake.base_url,
                               "UPSTREAM_KEY": UPSTREAM_KEY}
        done = await deferToThread(
            _run, ["bash", "-euo", "pipefail", "-c", shell + '\nprintf "%s" "$LOCKGATE_KEY"'],
            env)
        assert done.returncode == 0, done.stderr
        key = done.stdout.rsplit("}", 1)[-1].strip()
        assert key.startswith("sk-"), done.stdout
        answer = await deferToThread(_run, [sys.executable, "-c", python],
                                     {**env, "LOCKGATE_KEY": key})
        assert answer.returncode == 0, answer.stderr
        assert answer.stdout.strip() == "tok0 tok1 tok2"
        [sent] = self.fake.requests
        assert sent.body["model"] == "gpt-4o-mini"
        assert sent.headers["authorization"] == f"Bearer {UPSTREAM_KEY}"
        rows = await self.usage_rows()
        assert len(rows) == 1 and rows[0]["status"] == 0 and rows[0]["cost_nanos"] > 0
        await self.verify_ledger()
