"""Claude Code on the Messages API (`POST /v1/messages?beta=true`), as recorded from 2.1: the
`anthropic-version` header and a list of betas, top-level `system` as three text blocks with
`cache_control`, user turns as arrays of text blocks, a trailing `role: system` message in
`messages` where the model name is not a claude-* one, 24 tools whose schemas use `$schema`
2020-12 and its keywords, `max_tokens: 32000`, adaptive thinking, `output_config.effort`,
`context_management`, `metadata.user_id`, no sampling fields; 76-116 KB."""

from __future__ import annotations

import hashlib
from typing import Any

from pytest_frank.claims.clients import filler
from pytest_frank.claims.clients.profile import (
    ARRAYS,
    CACHE_CONTROL,
    LATE_SYSTEM,
    PROMPT,
    Choices,
    First,
    Profile,
    text_blocks,
)
from pytest_frank.runtime.chat import Call, Request

BETAS = ("claude-code-20250219", "interleaved-thinking-2025-05-14",
         "fine-grained-tool-streaming-2025-05-14", "context-management-2025-06-27",
         "prompt-caching-2024-07-31", "token-efficient-tools-2025-02-19", "effort-2025-11-24")
CACHED = {"type": "ephemeral"}


class ClaudeCode(Profile):
    name = "claude_code"
    label = "Claude Code"
    api = "messages"
    request_kb = 96.0
    budget = 32000
    first_answer_s = 600.0
    first_answer_from = "API_TIMEOUT_MS, default 600000"

    def build(self, choices: Choices, filler_text: str, budget: int | None) -> First:
        system = [{"type": "text", "text": "A coding agent in a terminal, working for its user."},
                  {"type": "text", "text": filler_text or "Keep answers short.",
                   "cache_control": CACHED},
                  {"type": "text", "text": "Working folder: /work/project. Platform: linux.",
                   "cache_control": CACHED}]
        messages: list[dict[str, Any]] = [{"role": "user", "content": text_blocks(
            "Context for this session: the project is a small notes folder.", PROMPT,
            cached=True)}]
        sends = {ARRAYS: "top-level system and user content as arrays of text blocks",
                 CACHE_CONTROL: "cache_control on system and user text blocks"}
        if not (choices.model or "").startswith("claude-"):
            # Sent where the model is not a claude-* name: it ends the messages list.
            messages.append({"role": "system", "content": "Reply in the user's language."})
            sends[LATE_SYSTEM] = ("a role: system message at the end of messages (sent where "
                                  "the model name is not claude-*)")
        user = hashlib.sha256(b"frank-clients").hexdigest()
        extra: dict[str, Any] = {
            "system": system, "metadata": {"user_id": f"user_{user}_session_frank"},
            "extra_headers": {"anthropic-version": "2023-06-01",
                              "anthropic-beta": ",".join(BETAS)},
            "extra_query": {"beta": "true"},
            "extra_body": {"thinking": {"type": "adaptive"}, "output_config": {"effort": "medium"},
                           "context_management": {"edits": [{"type": "clear_thinking_20251015",
                                                             "keep": "all"}]}}}
        if choices.model:
            extra["model"] = choices.model
        request = Request(PROMPT, budget or self.budget or 1, tools=filler.tools(24, rich=True),
                          stream=True, extra=extra, sampling=False, messages=messages)
        return First(request, request.tools or [], 0, budget, "max_tokens", sends)

    def reshape(self, history: list[dict]) -> list[dict]:
        """Its tool_result blocks carry is_error and the last one cache_control; a text block
        follows them in the same user turn."""
        *before, last = history
        results = [{**b, "is_error": False} for b in last["content"]]
        results[-1]["cache_control"] = CACHED
        return [*before, {"role": "user", "content": [
            *results, {"type": "text", "text": "Carry on with the task."}]}]

    def echoed(self, call: Call, args: dict) -> list[dict]:
        return [{"type": "tool_use", "id": call.id, "name": call.name, "input": args}]


PROFILE = ClaudeCode()
