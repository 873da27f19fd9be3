"""Console side of the assistant chat (agents contract §1): reading request bodies into store
values with the contract's messages, the JSON views, and the settings composition."""
