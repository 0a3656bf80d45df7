"""What a probe saw (`observation`) and how a test ends (`verdict`: a failure with its fix, the
kinds of skip, the phrasing of advice): the vocabulary the drivers, the runtime, the claims and
the reports all speak, so it sits below them."""
