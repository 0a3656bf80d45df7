"""One module per claim: `probe(target)` does the network work, `judge(observation)` decides."""
