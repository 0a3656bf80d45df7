"""An xdist scheduler that gives all of one endpoint's checks to one worker.

pytest-xdist is optional (the `parallel` extra): it is imported only when xdist asks for a
scheduler, so the plugin loads on a machine without it."""

from __future__ import annotations


def by_endpoint(config, log, endpoints: list[str]):
    from xdist.scheduler import LoadScopeScheduling

    class ByEndpoint(LoadScopeScheduling):
        # Longest first: "big-draft" is not "big" with a case "draft".
        names = sorted(endpoints, key=len, reverse=True)

        def _split_scope(self, nodeid: str) -> str:
            return endpoint_in(nodeid, self.names) or nodeid

    return ByEndpoint(config, log)


def endpoint_in(nodeid: str, endpoints: list[str]) -> str | None:
    """The endpoint a test id names: `test_x[NAME]` or, for a cased check, `test_x[NAME-CASE]`."""
    _, bracket, params = nodeid.partition("[")
    if not bracket:
        return None
    params = params.rsplit("]", 1)[0]
    return next((name for name in endpoints
                 if params == name or params.startswith(f"{name}-")), None)
