"""The arena's pure core: the economy's rules, valuations and views (no I/O, no wire types)."""
