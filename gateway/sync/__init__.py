"""Model-list and price sync from upstream channels: formats (pure) and the bounded fetch."""
