"""Console side of studio operations (agents contract §4): the JSON views, reading request
bodies with the contract's messages, and the transaction wrapper the studio routes share."""
