"""Long prompts sized to the served slot: a share of the context one conversation gets, counted in
the server's own tokens where the engine can count them (llama.cpp /tokenize), else estimated
at a byte-level tokenizer's worst case. A prompt past the slot is refused (llama.cpp answers 400
"exceeds the available context size"), which says nothing about what a probe measures."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable

from pytest_frank.base.figures import COUNT, number

if TYPE_CHECKING:
    from pytest_frank.drivers import Driver
    from pytest_frank.runtime.target import Target
    from pytest_frank.transport.http import Exchange

SHARE = 0.5  # of the slot's context a long prompt may take: room for the template and the reply
CHARS_PER_TOKEN = 1.0  # without the server's count: a byte-level tokenizer spends one a character
ROUNDS = 3  # counts at most, shrinking the prompt each time it is still too long
MARGIN = 0.95  # shrink a little more than the count says: each run's prompt differs a little


@dataclass(frozen=True)
class Fit:
    words: int  # how many words of filler to send
    tokens: int | None = None  # the prompt's size, counted or estimated; None: not sized
    counted_by: str = ""  # "the server's /tokenize" or the estimate's words
    note: str = ""  # why fewer words go out than were asked
    too_small: str | None = None  # the slot cannot hold a prompt worth measuring: why


def count(target: Target, text: str, by_usage: bool = False) -> tuple[int, str]:
    """The prompt's tokens by the server's own tokenizer where the engine has a route for it;
    else, with `by_usage`, by the usage of a one-token answer to it (a generation, and the prompt
    then sits in the prefix cache: never for a probe that measures the cache); else a worst-case
    estimate. And which of these it is."""
    asked = target.driver.counting.tokenize_request(target.model_name(), text)
    if asked is not None:
        ex = target.post(*asked)
        counted = target.driver.counting.token_count(ex.json()) if ex.ok else None
        if counted is not None:
            return counted, f"the server's {asked[0]}"
    if by_usage:
        from pytest_frank.runtime.chat import Request, send

        used = send(target, Request(text, 1)).prompt_tokens
        if used is not None:
            return used, "the usage of a one-token answer"
    return round(len(text) / CHARS_PER_TOKEN), f"an estimate of {CHARS_PER_TOKEN:g} token a character"


@dataclass(frozen=True)
class PromptCount:
    """The server's own count of the prompt a conversation renders to, or why there is none."""
    tokens: int | None = None
    by: str = ""  # the routes that counted it
    problem: str | None = None  # why the count could not be had (None: counted, or no route)
    prompt: str | None = None  # the rendered text, where a render route showed it


def count_chat(target: Target, messages: list[dict],
               tools: list[dict] | None = None) -> PromptCount | None:
    """The prompt the chat route renders from `messages`, counted by the server: in one request
    where the engine counts conversations (vLLM /tokenize), else its rendered text (llama.cpp
    /apply-template) counted as the chat route counts it. None where the engine has neither."""
    driver, model = target.driver, target.model_name()
    asked = driver.counting.chat_tokenize_request(model, messages, tools)
    if asked is not None:
        ex = target.post(*asked)
        counted = driver.counting.token_count(ex.json()) if ex.ok else None
        return PromptCount(counted, f"POST {asked[0]} with the messages",
                           None if counted is not None else _why(driver, ex, asked[0], "count"))
    render = driver.counting.render_request(model, messages, tools)
    if render is None:
        return None
    ex = target.post(*render)
    prompt = driver.counting.rendered_prompt(ex.json()) if ex.ok else None
    if prompt is None:
        return PromptCount(problem=_why(driver, ex, render[0], "prompt"))
    tokenize = driver.counting.tokenize_request(model, prompt, special=True)
    if tokenize is None:
        return PromptCount(problem=f"{driver.label} counts no text", prompt=prompt)
    ex = target.post(*tokenize)
    counted = driver.counting.token_count(ex.json()) if ex.ok else None
    return PromptCount(counted, f"POST {tokenize[0]} of POST {render[0]}'s prompt",
                       None if counted is not None else _why(driver, ex, tokenize[0], "count"),
                       prompt)


def _why(driver: Driver, ex: Exchange, route: str, want: str) -> str:
    return f"POST {route} {driver.reason(ex)}" if not ex.ok else \
        f"POST {route} answered {ex.snippet(120)!r}: no {want} in it"


def fit(target: Target, build: Callable[[int], str], words: int, reserve: int,
        least: int, share: float = SHARE, by_usage: bool = False) -> Fit:
    """As many of `words` as fit `share` of the slot's context, and `reserve` tokens (template,
    reply) besides; `too_small` where fewer than `least` prompt tokens would fit."""
    ctx = target.served_context()
    if not ctx:
        return Fit(words)
    room = min(int(ctx * share), ctx - reserve)
    if room < least:
        return Fit(words, too_small=(f"each slot holds {number(ctx, COUNT)} tokens: room for "
                                     f"{max(room, 0)} prompt tokens, fewer than the {least} a "
                                     f"measurement needs"))
    sent, (tokens, how) = words, count(target, build(words), by_usage)
    asked_tokens = tokens
    for _ in range(ROUNDS):
        if tokens <= room or sent <= 1:
            break
        sent = max(1, int(sent * room / tokens * MARGIN))
        tokens, how = count(target, build(sent), by_usage)
    if sent == words:
        return Fit(words, tokens, how)
    return Fit(sent, tokens, how, note=(
        f"{words} words are {number(asked_tokens, COUNT)} tokens by {how}, more than the "
        f"{number(room, COUNT)} a {number(ctx, COUNT)}-token slot leaves a long prompt: {sent} "
        f"words ({number(tokens, COUNT)} tokens) sent"))
