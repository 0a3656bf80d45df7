"""The live half of the gate: what the running server reports against the command that should
have started it. A difference means the files changed and the service was never restarted (or
something else started it)."""

from __future__ import annotations

from pathlib import Path

from pytest_frank.serve.command import ServeCommand
from pytest_frank.serve.flags import Parsed, parse
from pytest_frank.serve.gate import WHO, Finding


def drift(command: ServeCommand, live: dict, driver) -> list[Finding]:
    """`live` maps a route ("/props", "/slots", "/v1/models", ...) to its parsed JSON; routes the
    engine lacks are simply absent. Returns one finding per setting that differs."""
    table = driver.launch.serve_flags
    if table is None:
        return []
    p = parse(command, table)
    if not p.launched:
        return []
    restart = (f"systemctl restart {command.service}" if command.service
               else "restart the server with the current command")
    found: list[Finding] = []
    for check in (_context, _slots, _model, _aliases, _projector, _draft):
        said = check(p, live, driver)
        if said:
            where, asks, runs = said
            found.append(Finding(str(where), f"{WHO[command.kind]} asks {asks}, the server "
                                 f"runs {runs}: the service was not restarted since the edit",
                                 restart))
    return found


def _context(p: Parsed, live: dict, driver):
    ctx = p.number("ctx")
    count, per_slot, _ = driver.slot_shape(live)
    if not ctx or per_slot is None:
        return None
    parallel = p.number("parallel") or count or 1
    split = p.table.slots_split_ctx and not p.on("kv_unified") and parallel > 1
    want = ctx // parallel if split else ctx
    if per_slot == want or (split and per_slot == ctx):  # unified at run time: each sees all
        return None
    if split:
        return p.where("ctx"), f"ctx {ctx} ({parallel} slots of {want})", f"{per_slot} per slot"
    return p.where("ctx"), f"ctx {ctx}", str(per_slot)


def _slots(p: Parsed, live: dict, driver):
    parallel = p.number("parallel")
    count, _, _ = driver.slot_shape(live)
    if parallel is None or count is None or parallel == count:
        return None
    return p.where("parallel"), f"{parallel} slots", f"{count}"


def _model(p: Parsed, live: dict, driver):
    want = p.text("model")
    running = driver.served_model_path(live)
    if not want or not running or _same_path(want, running):
        return None
    return p.where("model"), f"model {want}", running


def _aliases(p: Parsed, live: dict, driver):
    names = p.items("alias")
    payload = live.get(driver.models_path)
    if not names or payload is None:
        return None
    try:
        served = driver.served_ids(payload)
    except (ValueError, KeyError, TypeError):
        return None
    missing = [n for n in names if n not in served]
    if not missing:
        return None
    return p.where("alias"), f"the name(s) {', '.join(names)}", f"as {', '.join(served) or '?'}"


def _projector(p: Parsed, live: dict, driver):
    if "mmproj" not in p.table.flags or driver.vision_advert_path not in live:
        return None
    sees = driver.vision_advertised(live[driver.vision_advert_path])
    wants = p.on("mmproj")
    if sees is None or sees == wants:
        return None
    return (p.where("mmproj"), "a vision projector" if wants else "no vision projector",
            "with vision" if sees else "without one")


def _draft(p: Parsed, live: dict, driver):
    drafting = driver.metrics.speculative_live(live)
    if drafting is None or "spec_type" not in p.table.flags:
        return None
    wants = p.text("spec_type") not in (None, "none")
    if drafting == wants:
        return None
    return (p.where("spec_type"), "speculative decoding" if wants else "no speculative decoding",
            "drafting" if drafting else "without drafting")


def _same_path(a: str, b: str) -> bool:
    if a == b:
        return True
    try:
        return Path(a).resolve() == Path(b).resolve()
    except OSError:
        return False
