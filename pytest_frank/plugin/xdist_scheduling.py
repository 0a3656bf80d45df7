"""An xdist scheduler that gives all the checks that reach one server to one worker: an
endpoint's, and those of every other entry of the fleet on the same host and port (its other
routes, a replica's name). One process then probes the server, and its limiter keeps each
measurement alone on it: two workers timing one slot would each see the other's generation.

pytest-xdist is optional (the `parallel` extra): it is imported only when xdist asks for a
scheduler, so the plugin loads on a machine without it."""

from __future__ import annotations


def by_server(config, log, scopes: dict[str, str]):
    """`scopes`: each endpoint's name to the scope its checks run in (the server it reaches,
    or its own name for a server of its own)."""
    from xdist.scheduler import LoadScopeScheduling

    class ByServer(LoadScopeScheduling):
        # Longest first: "big-draft" is not "big" with a case "draft".
        names = sorted(scopes, key=len, reverse=True)

        def _split_scope(self, nodeid: str) -> str:
            name = endpoint_in(nodeid, self.names)
            return scopes[name] if name else nodeid

    return ByServer(config, log)


def scopes_of(servers: dict[str, str]) -> dict[str, str]:
    """{endpoint: its scope} from {endpoint: the server it reaches ("" for its own)}."""
    return {name: f"server {server}" if server else f"endpoint {name}"
            for name, server in servers.items()}


def endpoint_in(nodeid: str, endpoints: list[str]) -> str | None:
    """The endpoint a test id names: `test_x[NAME]` or, for a cased check, `test_x[NAME-CASE]`."""
    _, bracket, params = nodeid.partition("[")
    if not bracket:
        return None
    params = params.rsplit("]", 1)[0]
    return next((name for name in endpoints
                 if params == name or params.startswith(f"{name}-")), None)
