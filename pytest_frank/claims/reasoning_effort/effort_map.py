"""A client's reasoning_effort map from its own config, so fleet.yaml does not repeat it: pi's
models.json (`providers.<name>.models[].compat.reasoningEffortMap`). Read when the
reasoning_effort claim parses its `from:` option."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

LEVELS = ("none", "minimal", "low", "medium", "high", "xhigh", "max")
MAX_BYTES = 4 << 20


class EffortMapError(ValueError):
    """The client config has no usable map; the message says where it looked."""


def read_effort_map(path: str | Path, model: str, url: str | None = None,
                    provider: str | None = None) -> dict[str, str]:
    """The map of the model entry whose id is `model` (in `provider`, or in the provider whose
    baseUrl is `url` when several list the id)."""
    data = _load(Path(path))
    entries = _entries(data, model, provider)
    if not entries:
        where = f"provider {provider!r}" if provider else "any provider"
        raise EffortMapError(f"{path}: no model {model!r} in {where}")
    if len(entries) > 1 and url:
        entries = [e for e in entries if _same_base(e[1].get("baseUrl"), url)] or entries
    if len(entries) > 1:
        names = ", ".join(name for name, _, _ in entries)
        raise EffortMapError(f"{path}: model {model!r} is listed by several providers ({names}): "
                             "name one with reasoning_effort.provider")
    name, prov, entry = entries[0]
    compat = {**(prov.get("compat") or {}), **(entry.get("compat") or {})}
    found = compat.get("reasoningEffortMap")
    if not isinstance(found, dict) or not found:
        raise EffortMapError(f"{path}: providers.{name} model {model!r} has no "
                             "compat.reasoningEffortMap")
    levels = {k: v for k, v in found.items() if k in LEVELS and isinstance(v, str) and v}
    if not levels:
        raise EffortMapError(f"{path}: providers.{name} model {model!r}: reasoningEffortMap "
                             f"maps none of the levels {', '.join(LEVELS)}")
    return levels


def _load(path: Path) -> dict:
    try:
        with path.open("rb") as f:
            raw = f.read(MAX_BYTES + 1)
    except OSError as exc:
        raise EffortMapError(f"{path}: cannot be read ({exc.strerror or exc})") from None
    if len(raw) > MAX_BYTES:
        raise EffortMapError(f"{path}: larger than {MAX_BYTES >> 20} MiB: not a models.json")
    try:
        data = json.loads(raw)
    except json.JSONDecodeError as exc:  # where and why, never the text: it may be any file
        raise EffortMapError(f"{path}:{exc.lineno}: not valid JSON ({exc.msg}): expected a pi "
                             "models.json") from None
    except ValueError:
        raise EffortMapError(f"{path}: not UTF-8 text: expected a pi models.json") from None
    if not isinstance(data, dict) or not isinstance(data.get("providers"), dict):
        raise EffortMapError(f"{path}: no `providers` mapping (not a pi models.json)")
    return data


def _entries(data: dict, model: str, provider: str | None) -> list[tuple[str, dict, dict]]:
    found = []
    for name, prov in data["providers"].items():
        if provider and name != provider or not isinstance(prov, dict):
            continue
        for entry in prov.get("models") or []:
            if isinstance(entry, dict) and entry.get("id") == model:
                found.append((name, prov, entry))
    return found


def _same_base(base: Any, url: str) -> bool:
    strip = lambda u: str(u or "").rstrip("/").removesuffix("/v1")  # noqa: E731
    return strip(base) == strip(url)
