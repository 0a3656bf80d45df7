"""Helpers every layer may use and that import nothing of the package beyond each other: the
run's state, redaction, host names, the figure registry, hook specifications, shards."""
