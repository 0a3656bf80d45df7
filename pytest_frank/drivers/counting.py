"""The server's own count of a prompt, as a part every driver holds (`driver.counting`): the
routes that tokenize a text, count a conversation or render it as the chat route would, and how
their answers read. The base part's readers say "unknown" (None): an engine with no such route
has this one, and a reader falls back to its own estimate as it does for an unreadable answer."""

from __future__ import annotations

from typing import Any


class Counting:
    """An engine that counts nothing on request: every route None, every answer unknown."""

    chat_count_route: str | None = None  # where the engine counts a conversation's prompt
    render_route: str | None = None  # where the engine renders a conversation on request

    def tokenize_request(self, model: str, text: str,
                         special: bool = False) -> tuple[str, dict] | None:
        """(route, body) that asks the server to count `text` in its own tokens; None where it
        cannot. `special`: count it as the chat route counts a rendered prompt (the tokenizer's
        BOS and special tokens included)."""
        return None

    def chat_tokenize_request(self, model: str, messages: list[dict],
                              tools: list[dict] | None = None) -> tuple[str, dict] | None:
        """(route, body) that counts a conversation's prompt as the chat route renders it, in
        one request; None where the engine has no such route (the prompt `render_request`
        shows is then counted with `tokenize_request`)."""
        return None

    def token_count(self, payload: Any) -> int | None:
        """The count from the tokenize route's answer; None when it is not one."""
        return None

    def render_request(self, model: str, messages: list[dict],
                       tools: list[dict] | None = None) -> tuple[str, dict] | None:
        """(route, body) that asks the server for the prompt its chat template renders from a
        chat-shaped conversation, as the chat route would; None where the engine does not render
        on request."""
        return None

    def rendered_prompt(self, payload: Any) -> str | None:
        """The prompt text from the render route's answer; None when it is not one."""
        return None
