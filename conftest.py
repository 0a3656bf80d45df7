# The repository root: scripts and examples are not test modules.
collect_ignore = ["bench", "examples"]
