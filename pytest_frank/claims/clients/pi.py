"""pi (0.73) on chat completions, as recorded: a `developer` message first (the model reasons),
user content as `[{type: text}]`, `max_completion_tokens: 4096`, `store: false`,
`stream_options.include_usage`, tools with `strict: false`, assistant content null beside its
tool_calls, no sampling fields; 5.6 KB."""

from __future__ import annotations

from pytest_frank.claims.clients import filler
from pytest_frank.claims.clients.profile import ARRAYS, PROMPT, Choices, First, Profile, text_blocks
from pytest_frank.runtime.chat import Request


class Pi(Profile):
    name = "pi"
    label = "pi"
    request_kb = 5.6
    budget = 4096
    first_answer_s = 300.0
    first_answer_from = "httpIdleTimeoutMs, default 300000"
    budget_field = "max_completion_tokens"

    def build(self, choices: Choices, filler_text: str, budget: int | None) -> First:
        messages: list[dict] = [
            {"role": "developer", "content": filler_text or "Keep answers short."},
            {"role": "user", "content": text_blocks(PROMPT)}]
        extra: dict = {"store": False, **({"model": choices.model} if choices.model else {})}
        request = Request(PROMPT, budget or 4096, tools=filler.tools(7, rich=False, strict=False),
                          stream=True, extra=extra, sampling=False, messages=messages,
                          budget_key="max_completion_tokens", stream_usage=True)
        return First(request, request.tools or [], 0, budget, self.budget_field,
                     {ARRAYS: "user content as an array of text blocks"})


PROFILE = Pi()
