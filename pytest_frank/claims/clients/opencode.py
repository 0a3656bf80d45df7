"""opencode (1.18) on chat completions, as recorded: a system message, then two consecutive
user messages, `tool_choice: auto`, assistant content "" beside its tool_calls, no sampling
fields; 30 KB. Its output budget is capped at 32000 tokens."""

from __future__ import annotations

from pytest_frank.claims.clients import filler
from pytest_frank.claims.clients.profile import PROMPT, Choices, First, Profile
from pytest_frank.runtime.chat import Request


class OpenCode(Profile):
    name = "opencode"
    label = "opencode"
    request_kb = 30.0
    budget = 32000
    first_answer_s = 300.0
    first_answer_from = "provider options.timeout, default 300000 ms"

    def build(self, choices: Choices, filler_text: str, budget: int | None) -> First:
        messages = [{"role": "system", "content": filler_text or "Keep answers short."},
                    {"role": "user", "content": "Working folder: /work/project (a git repo)."},
                    {"role": "user", "content": PROMPT}]
        extra: dict = {"model": choices.model} if choices.model else {}
        request = Request(PROMPT, budget or 32000, tools=filler.tools(12, rich=False),
                          tool_choice="auto", stream=True, extra=extra, sampling=False,
                          messages=messages)
        return First(request, request.tools or [], 0, budget, "max_tokens")

    def reshape(self, history: list[dict]) -> list[dict]:
        """Its assistant turn with tool_calls carries content "", not null."""
        return [{**m, "content": ""} if m.get("role") == "assistant" and m.get("content") is None
                else m for m in history]


PROFILE = OpenCode()
