"""xdist's scheduling for the suite, used by tests/conftest.py when `-n` runs it without a
`--dist` of the caller's own. A module apart: xdist is a test extra, and the conftest also loads
where only the battery runs (the README's main command)."""

from __future__ import annotations

import functools
import re
from pathlib import Path

from vllm_server import on_vllm
from xdist.scheduler import LoadScopeScheduling


class VllmFirst(LoadScopeScheduling):
    """xdist's scheduling for the suite: the real-vLLM tests are one unit of work, handed out
    first, so one worker starts each configuration once, in order, while the other workers take
    the rest test by test (the real-tier modules first, by their marker, whatever their file's
    name: their long tests are worse at the end), but for the modules in ONE_WORKER, each one
    unit."""

    def _split_scope(self, nodeid: str) -> str:
        if on_vllm(nodeid):
            return VLLM_UNIT
        module = nodeid.split("::", 1)[0]
        return module if module.endswith(ONE_WORKER) else nodeid

    def _assign_work_unit(self, node) -> None:
        if self.workqueue:
            root = self.config.rootpath
            self.workqueue.move_to_end(min(self.workqueue, key=lambda s: _weight(s, root)),
                                       last=False)  # the whole queue each time: weights cached
        super()._assign_work_unit(node)


VLLM_UNIT = "real vLLM"
# Modules whose tests share runs a session or module caches (the real clients' runs, seconds
# each; one mypy run): split across workers, each worker would run them again. And the packaging
# tests, which pip-install the checkout itself: two at once build in its one build/ folder, and
# one of them fails.
ONE_WORKER = ("test_real_clients.py", "test_types.py", "test_packaging.py")


@functools.lru_cache(maxsize=None)
def _weight(scope: str, root: Path) -> int:
    if scope == VLLM_UNIT:
        return 0
    return 1 if _real(root / scope.split("::", 1)[0]) else 2


@functools.lru_cache(maxsize=None)
def _real(module: Path) -> bool:
    """Whether the module's tier (its one `pytestmark`, tests/conftest.py) is real."""
    try:
        text = module.read_text(encoding="utf-8")
    except OSError:
        return False
    return re.search(r"^pytestmark = .*\bpytest\.mark\.real\b", text, re.M) is not None
