"""The closing table: one line per endpoint, one verdict per claim."""

from __future__ import annotations

SHORT = {"passed": "ok", "failed": "FAIL", "skipped": "skip", "error": "ERROR"}


def verdict_table(stats: dict) -> list[str]:
    verdicts: dict[str, dict[str, str]] = {}
    for outcome, reports in stats.items():
        for report in reports:
            props = dict(getattr(report, "user_properties", ()) or ())
            name, claim = props.get("endpoint"), props.get("claim")
            if not name or not claim or getattr(report, "when", None) not in ("setup", "call"):
                continue
            if outcome not in _RANK or (report.when == "setup" and outcome == "passed"):
                continue  # the call phase decides (a passed setup is filed under "")
            _worst(verdicts.setdefault(name, {}), claim, outcome)
    if not verdicts:
        return []
    width = max(len(n) for n in verdicts)
    return [f"{name:<{width}}  " + "  ".join(f"{c} {SHORT.get(o, o)}" for c, o in claims.items())
            for name, claims in verdicts.items()]


# A skip ranks below a pass: an optional part left out by fleet.yaml (tools.parallel, say) must
# not turn a claim whose probes all passed into "skip"; a claim with nothing run stays "skip".
_RANK = {"skipped": -1, "passed": 0, "xfailed": 1, "xpassed": 1, "failed": 2, "error": 3}


def _worst(claims: dict[str, str], claim: str, outcome: str) -> None:
    # A claim probed several times (per level, per trial) is as good as its worst result.
    if _RANK.get(outcome, 2) >= _RANK.get(claims.get(claim, "passed"), 0) or claim not in claims:
        claims[claim] = outcome
