"""clients: each coding client's own first request, and its next one carrying a tool's result,
on the client's own route: one test per client."""

from pytest_frank.claims import battery

globals().update(battery("clients"))
