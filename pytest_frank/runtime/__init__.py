"""The runtime that probes and judges: an endpoint under test (`target`), the session that
probes the fleet (`session`, `probes`, `identify`), one request path for generation (`chat`),
the usual fix for an error answer the engines word alike (`known_errors`). It asks the engines'
drivers for their facts; the claims' judges read what it gathered."""
