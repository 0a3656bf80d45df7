"""What every engine driver answers; a check asks the driver and never names an engine."""

from __future__ import annotations

from dataclasses import dataclass

from pytest_frank.http import Exchange


@dataclass
class Readiness:
    state: str  # "ready" | "loading" | "down"
    detail: str


class Driver:
    """The generic OpenAI-compatible server; engines override what differs."""

    name = "openai"
    label = "OpenAI-compatible server"
    health_path = "/v1/models"  # a generic server has no health route; a model list is the proof
    models_path = "/v1/models"
    alias_flag = "the server's model name setting"

    def auth_headers(self, api_key: str | None) -> dict[str, str]:
        return {"Authorization": f"Bearer {api_key}"} if api_key else {}

    def readiness(self, ex: Exchange) -> Readiness:
        if ex.error:
            return Readiness("down", ex.error)
        if ex.status == 200:
            return Readiness("ready", f"{ex.status} {ex.snippet(80)}".strip())
        if self.is_loading(ex):
            return Readiness("loading", f"{ex.status} {self.error_message(ex) or ex.snippet(120)}")
        return Readiness("down", f"answered {ex.status}: {self.error_message(ex) or ex.snippet(200)}")

    def is_loading(self, ex: Exchange) -> bool:
        return False

    def served_ids(self, payload) -> list[str]:
        """The model names a client may ask for, from the models route."""
        cards = payload.get("data") if isinstance(payload, dict) else None
        if not isinstance(cards, list):
            raise ValueError("no `data` list of model cards")
        return [c["id"] for c in cards if isinstance(c, dict) and isinstance(c.get("id"), str)]

    def error_message(self, ex: Exchange) -> str | None:
        """The server's own error text from an OpenAI-style `{"error": {"message": ...}}` body."""
        body = ex.json()
        if not isinstance(body, dict):
            return None
        err = body.get("error", body.get("detail"))
        if isinstance(err, dict):
            err = err.get("message")
        return str(err) if err else body.get("message")

    def alias_fix(self, alias: str) -> str:
        return f"serve it under that name ({self.alias_flag} {alias})"
