"""clients: each coding client's own first request, and its next one carrying a tool's result,
on the client's own route: one test per client."""

from pytest_frank.claims import clients
from pytest_frank.claims.checks import battery_test

test_client = battery_test(clients.CLIENT)
