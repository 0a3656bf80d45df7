"""The hooks pytest-frank adds to pytest's (declared through `pytest_addhooks` in the plugin).
A conftest.py or a plugin package implements them like pytest's own."""


def pytest_frank_claims(register):
    """Register claims of your own, once per run, before the fleet file is read:
    `register(name, about, options=OptionsClass, schema={...})` (pytest_frank.claims.register).
    Each becomes a marker, a fleet.yaml `expect:` key validated by `schema` (a JSON schema
    fragment for its value) and a column of the verdicts matrix; its checks are ordinary tests
    marked with it."""
