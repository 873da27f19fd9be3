"""The exact MCP tool naming rule of agents contract §1.3 and the MCP server item rules."""

from __future__ import annotations

import hashlib

from twisted.trial.unittest import TestCase

from gateway.assistant import mcp_servers
from gateway.assistant.ids import base36, mcp_server_id, random_id
from gateway.assistant.tool_names import ToolNamer, description, tool_name


class ToolNameTests(TestCase):
    def test_plain_names(self) -> None:
        assert tool_name("docs", "search") == "mcp_docs__search"
        assert tool_name("mcp-1a2b", "get-page") == "mcp_mcp-1a2b__get-page"

    def test_unsafe_characters_and_trimming(self) -> None:
        assert tool_name("my server!", "find it") == "mcp_my_server__find_it"
        assert tool_name("__x--", "--y__") == "mcp_x__y"
        # only the first 16 characters of the server id, then trimmed
        assert tool_name("abcdefghijklmno.pqrstu", "t") == "mcp_abcdefghijklmno__t"

    def test_long_names_are_hashed(self) -> None:
        long_name = "mcp_server__" + "t" * 60
        expected = long_name[:48].rstrip("_-") + "_" + hashlib.sha1(
            long_name.encode()).hexdigest()[:8]
        assert tool_name("server", "t" * 60) == expected and len(expected) <= 64
        # "mcp_s__" is 7 characters: 64 in all is kept, 65 is hashed
        assert tool_name("s", "x" * 57) == "mcp_s__" + "x" * 57
        assert len(tool_name("s", "x" * 58)) == 48 + 1 + 8
        # the 48-character cut ends in "_": trimmed before the hash is appended
        cut = tool_name("s", "a" * 40 + "_" + "b" * 30)
        assert cut.startswith("mcp_s__" + "a" * 40 + "_") and len(cut) == 47 + 1 + 8

    def test_collisions_are_numbered(self) -> None:
        namer = ToolNamer()
        assert [namer.name("a b", "t"), namer.name("a_b", "t"), namer.name("a?b", "t")] == [
            "mcp_a_b__t", "mcp_a_b__t_2", "mcp_a_b__t_3"]

    def test_descriptions(self) -> None:
        assert description("Docs", " Search docs ") == "MCP server Docs: Search docs"
        assert description("Docs", "") == "MCP server Docs"


class IdTests(TestCase):
    def test_formats(self) -> None:
        made = random_id("acs")
        assert made.startswith("acs-") and len(made) == 20 and made == made.lower()
        assert base36(0) == "0" and base36(35) == "z" and base36(36) == "10"
        assert mcp_server_id(1_700_000_000_000_000_000, 2) == "mcp-" + base36(
            1_700_000_000_000_000_002)


class ServerItemTests(TestCase):
    def test_headers_in_both_forms(self) -> None:
        assert mcp_servers.parse_headers('{"A": "1", "B": "2"}') == [("A", "1"), ("B", "2")]
        assert mcp_servers.parse_headers("A: 1\n\nB:two: parts\n") == [("A", "1"),
                                                                      ("B", "two: parts")]
        for bad in ("{not json", '{"A": 1}', "no colon here", "Bad Name: x", '["A"]',
                    "X-Key: \u2603"):
            self.assertRaises(mcp_servers.InvalidServers, mcp_servers.parse_headers, bad)

    def test_items(self) -> None:
        items = mcp_servers.read_servers([
            {"name": " Web ", "url": "https://web.example/mcp", "type": "weird"},
            {"id": "local", "name": "Local", "type": "connector", "command": "node",
             "url": "ignored", "headers": "ignored"}], lambda i: f"gen-{i}")
        assert items == [
            {"id": "gen-0", "name": "Web", "type": "http", "enabled": True,
             "url": "https://web.example/mcp", "headers": ""},
            {"id": "local", "name": "Local", "type": "connector", "enabled": True,
             "command": "node", "args": [], "env": {}, "cwd": ""}]
        refused = [
            [{"name": "x", "url": "https:///no-host"}],
            [{"name": "x", "url": "h" * 2001}],
            [{"name": "n" * 101, "url": "http://x"}],
            [{"id": "i" * 81, "name": "x", "url": "http://x"}],
            [{"name": "x", "type": "connector", "command": "c", "args": ["a"] * 65}],
            [{"name": "x", "type": "connector", "command": "c",
              "env": {f"K{i}": "v" for i in range(51)}}],
            [{"name": "x", "type": "connector", "command": "c", "env": {"K": "a\x00"}}],
            [{"name": "x", "type": "connector", "command": "c", "cwd": "d" * 1001}],
            [{"name": "x", "url": "http://x", "enabled": "yes"}],
            ["not an object"],
        ]
        for servers in refused:
            self.assertRaises(mcp_servers.InvalidServers, mcp_servers.read_servers, servers,
                              str)
