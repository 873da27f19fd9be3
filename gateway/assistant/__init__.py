"""Assistant chat (agents contract §1): the parts the run loop and the console share.

Pure rules (ids, MCP server items, tool names, admin settings) import no Twisted networking;
``mcp_client`` talks to MCP servers over HTTP and is handed its agent and clock.
"""
