"""llama.cpp's llama-server."""

from __future__ import annotations

from pytest_frank.drivers.base import Driver


class LlamaCppDriver(Driver):
    name = "llamacpp"
    label = "llama.cpp server"
    health_path = "/health"
    alias_flag = "llama-server --alias"

    def is_loading(self, ex):
        # While the model loads, every route answers 503 "Loading model".
        return ex.status == 503 and "loading model" in ex.body.lower()

    def served_ids(self, payload):
        ids = super().served_ids(payload)
        for card in payload["data"]:
            aliases = card.get("aliases") if isinstance(card, dict) else None
            if isinstance(aliases, list):
                ids += [a for a in aliases if isinstance(a, str) and a not in ids]
        return ids

    def alias_fix(self, alias):
        return f"add it to --alias (comma-separated list): --alias {alias}"
