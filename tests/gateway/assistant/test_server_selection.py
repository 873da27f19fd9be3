"""Which servers a run uses: referenced ids, builtin-first merging and [P-3] temporary
servers, with the contract's refusals."""

from __future__ import annotations

from twisted.trial.unittest import TestCase

from gateway.assistant.server_selection import (
    SelectionRefused,
    referenced_ids,
    select_servers,
)

BUILTIN = [{"id": "docs", "name": "Docs", "type": "http", "url": "http://b", "enabled": True},
           {"id": "off", "name": "Off", "type": "http", "url": "http://o", "enabled": False}]
CUSTOM = [{"id": "docs", "name": "Shadow", "type": "http", "url": "http://c", "enabled": True},
          {"id": "mine", "name": "Mine", "type": "http", "url": "http://m", "enabled": True}]


class SelectionTests(TestCase):
    def test_order_merge_and_temporary(self) -> None:
        ids = referenced_ids(["mine"], ["docs", "mine"], ["docs"])
        assert ids == ["mine", "docs"]
        chosen = select_servers(ids, BUILTIN, CUSTOM, [
            {"name": "Tmp", "url": "http://t"}, {"id": "x", "name": "X", "url": "http://x"}])
        assert [(s["id"], s["name"]) for s in chosen] == [
            ("mine", "Mine"), ("docs", "Docs"), ("tmp-1", "Tmp"), ("x", "X")]

    def test_refusals(self) -> None:
        for ids, temporary, message in (
                (["off"], None, "unknown or disabled MCP server: off"),
                (["ghost"], None, "unknown or disabled MCP server: ghost"),
                ([], [{"name": "bad", "url": "ftp://x"}], "Invalid MCP server configuration"),
                (["mine"], [{"id": "mine", "name": "M", "url": "http://x"}],
                 "Invalid MCP server configuration"),
                (["mine"], [{"name": f"t{i}", "url": "http://x"} for i in range(20)],
                 "Too many MCP servers")):
            with self.assertRaises(SelectionRefused) as caught:
                select_servers(ids, BUILTIN, CUSTOM, temporary)
            assert str(caught.exception) == message
