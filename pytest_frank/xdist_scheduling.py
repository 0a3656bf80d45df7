"""An xdist scheduler that gives all of one endpoint's checks to one worker."""

from __future__ import annotations

from xdist.scheduler import LoadScopeScheduling


class ByEndpoint(LoadScopeScheduling):
    def __init__(self, config, log, endpoints: list[str]):
        super().__init__(config, log)
        # Longest first: "big-draft" is not "big" with a case "draft".
        self.endpoints = sorted(endpoints, key=len, reverse=True)

    def _split_scope(self, nodeid: str) -> str:
        return endpoint_in(nodeid, self.endpoints) or nodeid


def endpoint_in(nodeid: str, endpoints: list[str]) -> str | None:
    """The endpoint a test id names: `test_x[NAME]` or, for a cased check, `test_x[NAME-CASE]`."""
    _, bracket, params = nodeid.partition("[")
    if not bracket:
        return None
    params = params.rsplit("]", 1)[0]
    return next((name for name in endpoints
                 if params == name or params.startswith(f"{name}-")), None)
