"""What a client profile is: the client's first request on its own route, built to its size,
and its next request carrying a tool's result, in the client's own history shape. The features
a profile sends that a server or proxy may refuse are named, so a failure says which broke."""

from __future__ import annotations

import abc
import zlib
from dataclasses import dataclass, field, replace
from typing import Any

from pytest_frank.claims import option
from pytest_frank.claims.clients.filler import prose, size_of
from pytest_frank.drivers.base import Driver
from pytest_frank.runtime.chat import Call, Reply, Request

PROMPT = ("Look at notes.txt in this project and tell me in one sentence what it is for. "
          "Use a tool if you need one.")
# The names of the features a server or proxy may refuse, as profiles declare them.
LATE_SYSTEM, ARRAYS, CACHE_CONTROL = "late_system", "arrays", "cache_control"


@dataclass(frozen=True)
class Choices:
    """One client's options under expect.clients (None: the client's own default)."""

    request_kb: float | None = option(None, exclusiveMinimum=0, about=(
        "The first request's size in KB (Claude Code's 24 tools keep it above ~14 KB). Default: "
        "the client's measured size."))
    model: str | None = option(None, minLength=1, about=(
        "The model name the client is configured with, sent as the client sends it "
        "(`claude_code`: a `claude-*` name drops the trailing system message). Default: the "
        "served model."))
    max_tokens: int | None = option(None, minimum=1, about=(
        "The output budget the client is configured to ask. Default: the client's own."))


@dataclass
class First:
    """A profile's first request and what it was built from."""

    request: Request
    tools: list[dict]
    size: int  # bytes of JSON, near enough the body's
    budget: int | None  # the output budget the client asks (None: it sends none)
    budget_field: str  # where it asks it
    sends: dict[str, str] = field(default_factory=dict)  # feature -> where the request has it


class Profile(abc.ABC):
    """A client: its route, its typical first request's size, its output budget."""

    name = ""
    label = ""
    api = "chat"
    request_kb = 1.0
    budget: int | None = None
    budget_field = "max_tokens"
    # How long the client waits for an answer to begin, by its documented default, and the
    # setting that changes it: a long first request on a CPU server takes minutes of prompt
    # processing, which the client sits through and so does its probe (within FIRST_ANSWER_MAX_S).
    first_answer_s = 300.0
    first_answer_from = ""

    def first(self, choices: Choices) -> First:
        """The client's first request, filled to `request_kb` with generated prose (seeded by
        the client's name: the same bytes every run)."""
        seed = zlib.crc32(self.name.encode())
        budget = choices.max_tokens or self.budget
        shell = self.build(choices, "", budget)
        target = int((choices.request_kb or self.request_kb) * 1024)
        room = target - size_of(shell.request.messages, shell.request.tools, shell.request.extra)
        built = self.build(choices, prose(room, seed), budget) if room > 0 else shell
        built.size = size_of(built.request.messages, built.request.tools, built.request.extra)
        return built

    @abc.abstractmethod
    def build(self, choices: Choices, filler: str, budget: int | None) -> First:
        """The request with `filler` as the bulk of its instructions."""

    def then(self, driver: Driver, first: First, reply: Reply, results: list[str]) -> Request:
        """The next request: the history with the assistant's calls and their results, in the
        shape the route's driver keeps it; profiles reshape it where their client differs."""
        sent = first.request.messages or []
        return replace(first.request,
                       messages=self.reshape(driver.wire.agent_history(sent, reply, results)))

    def reshape(self, history: list[dict]) -> list[dict]:
        return history

    def echoed(self, call: Call, args: dict) -> list[dict]:
        """An earlier assistant turn's call as the route's reply blocks hold it (the chat shape
        keeps calls alone)."""
        return []


def text_blocks(*texts: str, cached: bool = False) -> list[dict[str, Any]]:
    """Content as an array of text blocks; `cached` marks the last with cache_control."""
    blocks: list[dict[str, Any]] = [{"type": "text", "text": t} for t in texts]
    if cached:
        blocks[-1]["cache_control"] = {"type": "ephemeral"}
    return blocks
