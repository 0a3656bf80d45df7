"""What a check saw, kept per test so reports can show it: exchanges, notes, attachments."""

from __future__ import annotations

from typing import Any, Callable

from pytest_frank import redact


class Probed:
    """The `endpoint` fixture: one endpoint as a single test sees it, collecting its evidence."""

    def __init__(self, target):
        self.target = target
        self.name = target.name
        self.config = target.endpoint
        self.driver = target.driver
        self.exchanges: list = []
        self.notes: list[str] = []
        self.attachments: list[dict[str, Any]] = []  # {"name", "mime", "data" (base64 or text)}

    def probe(self, fn: Callable) -> Any:
        result = self.target.probe(fn)
        for ex in getattr(result, "exchanges", ()):
            if ex not in self.exchanges:
                self.exchanges.append(ex)
        return result

    def note(self, text: str) -> None:
        self.notes.append(text)

    def attach(self, name: str, mime: str, data: str) -> None:
        self.attachments.append({"name": name, "mime": mime, "data": data})

    def text(self) -> str:
        lines = [ex.summary() for ex in self.exchanges]
        last = next((ex for ex in reversed(self.exchanges) if not ex.error), None)
        if last is not None:
            lines.append(f"reproduce: {last.curl()}")
        lines += self.notes
        return redact.scrub("\n".join(lines))

    def records(self) -> dict[str, Any]:
        return {"endpoint": self.name, "engine": self.config.engine,
                "exchanges": [ex.record() for ex in self.exchanges], "notes": list(self.notes)}
