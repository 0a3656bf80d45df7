"""Open WebUI on chat completions with native function calling: a system message, user content
as a string, a few tools, streamed, no output budget and no sampling fields unless the user set
them (the server's defaults decide); a couple of KB."""

from __future__ import annotations

from pytest_frank.claims.clients import filler
from pytest_frank.claims.clients.profile import PROMPT, Choices, First, Profile
from pytest_frank.runtime.chat import Request

STREAM_BOUND = 4096  # sent no budget: the stream is read this far at most


class OpenWebUI(Profile):
    name = "openwebui"
    label = "Open WebUI"
    request_kb = 2.0
    budget = None
    first_answer_s = 300.0
    first_answer_from = "AIOHTTP_CLIENT_TIMEOUT, default 300"
    budget_field = "no max_tokens (the server's default)"

    def build(self, choices: Choices, filler_text: str, budget: int | None) -> First:
        messages = [{"role": "system", "content": filler_text or "Keep answers short."},
                    {"role": "user", "content": PROMPT}]
        extra: dict = {"model": choices.model} if choices.model else {}
        request = Request(PROMPT, budget or STREAM_BOUND, tools=filler.tools(3, rich=False),
                          stream=True, extra=extra, sampling=False, messages=messages,
                          budget_key="max_tokens" if budget else None)
        return First(request, request.tools or [], 0, budget,
                     "max_tokens" if budget else self.budget_field)


PROFILE = OpenWebUI()
