"""alias: the name clients ask for is served by /v1/models."""

import pytest

from pytest_frank.claims import alias


@pytest.mark.alias
def test_alias(endpoint):
    wanted = endpoint.config.alias
    alias.judge(endpoint.probe(alias.probe), wanted, endpoint.driver.alias_fix(wanted))
