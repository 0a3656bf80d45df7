"""The fleet for one pytest session: a Target per endpoint, probed concurrently up front."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

from pytest_frank.fleet import Endpoint
from pytest_frank.target import Target


class FrankSession:
    def __init__(self, fleet: dict[str, Endpoint], timeout: float):
        self.targets = {name: Target(ep, timeout) for name, ep in fleet.items()}

    def prefetch_health(self, names: list[str], workers: int) -> None:
        """Probe every selected endpoint's health at once, so fifty dead hosts cost one timeout."""
        from pytest_frank.claims import health

        # Launches first, one after another: local servers share the machine's cores.
        for name in names:
            self.targets[name].start()
        if not names:
            return
        with ThreadPoolExecutor(max_workers=min(workers, len(names))) as pool:
            list(pool.map(lambda n: self.targets[n].probe(health.probe), names))

    def close(self) -> None:
        for target in self.targets.values():
            target.close()
