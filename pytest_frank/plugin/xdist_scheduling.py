"""An xdist scheduler that gives all the checks that reach one server to one worker: an
endpoint's, and those of every other entry of the fleet on the same host and port (its other
routes, a replica's name). One process then probes the server, and its limiter keeps each
measurement alone on it: two workers timing one slot would each see the other's generation
(two entries of one 1-slot llama.cpp under `-n 2 --dist load`: a first token of 0.73 s against
0.32 s alone, and a fix blaming the server's threads).

A fleet run uses it whatever `--dist` says (load, loadscope, loadfile, loadgroup, worksteal
would each split one server's checks over workers); `--dist each`, which runs every check in
every worker, is refused (`refusal`).

pytest-xdist is optional (the `parallel` extra): it is imported only when xdist asks for a
scheduler, so the plugin loads on a machine without it."""

from __future__ import annotations


def by_server(config, log, scopes: dict[str, str]):
    """`scopes`: each endpoint's name to the scope its checks run in (the server it reaches,
    or its own name for a server of its own). A test of no endpoint (the project's own) keeps
    its `xdist_group` under `--dist loadgroup`, and is its own unit otherwise."""
    from xdist.scheduler import LoadScopeScheduling

    grouped = config.getvalue("dist") == "loadgroup"

    class ByServer(LoadScopeScheduling):
        # Longest first: "big-draft" is not "big" with a case "draft".
        names = sorted(scopes, key=len, reverse=True)

        def _split_scope(self, nodeid: str) -> str:
            name = endpoint_in(nodeid, self.names)
            if name:
                return scopes[name]
            if grouped and nodeid.rfind("@") > nodeid.rfind("]"):
                return nodeid.split("@")[-1]  # xdist's own loadgroup suffix
            return nodeid

    return ByServer(config, log)


def under_xdist(config) -> bool:
    """Whether this process is an xdist controller that hands checks to workers."""
    option = config.option
    return (getattr(option, "dist", "no") != "no" and bool(getattr(option, "tx", None))
            and not hasattr(config, "workerinput"))


def refusal(config) -> str | None:
    """Why this run's `--dist` cannot verify a fleet, with the flag to change; None if it can."""
    if under_xdist(config) and config.option.dist == "each":
        return ("--dist each runs every check in every worker, so the workers would measure "
                "each server at the same time; leave --dist out: under -n, pytest-frank gives "
                "all the checks of one server to one worker")
    return None


def header(config) -> str | None:
    """The header's line on how xdist runs the fleet, where it does."""
    if not under_xdist(config):
        return None
    asked = config.option.dist
    instead = f", in place of --dist {asked}" if asked != "loadgroup" else ""
    return (f"xdist: the checks of each server go to one worker, one measurement at a time "
            f"(pytest-frank schedules by server{instead})")


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
