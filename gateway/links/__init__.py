"""Agent links: connector devices and sandbox hosts holding a WebSocket or long-poll link,
and the connector-task queue they share (agents contract §1.13, §2, §3)."""
