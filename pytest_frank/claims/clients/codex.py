"""Codex (0.171) on the Responses API (`POST /v1/responses`), as recorded: `instructions`, then
two `developer` input items before the user's, flat function tools with `strict: false`,
`tool_choice: auto`, `reasoning: {summary: auto}`, `include: [reasoning.encrypted_content]`,
`store: false`, `prompt_cache_key`, no output budget and no sampling fields; 40 KB. Its next
turn carries `function_call` and `function_call_output` items (the route's driver builds them)."""

from __future__ import annotations

import uuid

from pytest_frank.claims.clients import filler
from pytest_frank.claims.clients.profile import LATE_SYSTEM, PROMPT, Choices, First, Profile
from pytest_frank.runtime.chat import Call, Request

STREAM_BOUND = 8192  # sent no budget: the stream is read this far at most


def _item(role: str, text: str) -> dict:
    return {"type": "message", "role": role, "content": [{"type": "input_text", "text": text}]}


class Codex(Profile):
    name = "codex"
    label = "Codex"
    api = "responses"
    request_kb = 40.0
    budget = None
    first_answer_s = 300.0
    first_answer_from = "stream_idle_timeout_ms, default 300000"
    budget_field = "no max_output_tokens (the server's default)"

    def build(self, choices: Choices, filler_text: str, budget: int | None) -> First:
        items = [_item("developer", "Sandbox: workspace-write; approvals: on-request."),
                 _item("developer", "Commit messages in the imperative."),
                 _item("user", "Working folder: /work/project; shell: bash."),
                 _item("user", PROMPT)]
        extra: dict = {"instructions": filler_text or "Keep answers short.",
                       "reasoning": {"summary": "auto"},
                       "include": ["reasoning.encrypted_content"], "store": False,
                       "prompt_cache_key": str(uuid.uuid5(uuid.NAMESPACE_URL, "frank-codex")),
                       **({"model": choices.model} if choices.model else {})}
        request = Request(PROMPT, budget or STREAM_BOUND,
                          tools=filler.tools(9, rich=False, strict=False), tool_choice="auto",
                          parallel=False, stream=True, extra=extra, sampling=False,
                          messages=items, budget_key="max_output_tokens" if budget else None)
        return First(request, request.tools or [], 0, budget,
                     "max_output_tokens" if budget else self.budget_field,
                     {LATE_SYSTEM: "two developer input items after its instructions"})

    def echoed(self, call: Call, args: dict) -> list[dict]:
        return [{"type": "function_call", "name": call.name, "arguments": call.arguments,
                 "call_id": call.id}]


PROFILE = Codex()
