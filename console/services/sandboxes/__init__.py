"""Cloud sandboxes in the console: the create input, the JSON shapes (agents contract §3.4)."""
