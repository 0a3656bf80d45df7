"""The chat template a server renders a conversation with, as a part every driver holds
(`driver.template`): which template it serves, what that template can do, where an error says
it raised, which tool-call family it selects and which history fields it reads. The base part's
readers say "unknown" (None, {}): an engine that does not show its template has this one, so a
reader asks every engine alike and treats unknown as it treats an engine that says nothing."""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType


class Template:
    """An engine that does not show its template: every reader answers unknown."""

    # What the engine serves where the model file carries no template: the template's text and
    # a line saying so (None: it refuses, or does not say).
    fallback: str | None = None
    fallback_line: str | None = None
    # Of history_reasoning_fields (of every route), those the engine reads into its chat
    # template: one of them that leaves the prompt as long as no reasoning does, where another
    # lengthens it, was dropped on the way (test_agent_reasoning_history); None where the
    # engine is not known.
    history_reasoning_read: tuple[str, ...] | None = None
    # Tool-call family (pytest_frank.claims.tools.FAMILIES) -> what a served chat template must
    # carry for the engine to parse that family's calls; empty where a server flag, not the
    # template, picks the parser.
    call_family_markers: Mapping[str, tuple[str, ...]] = MappingProxyType({})

    def served(self, payloads: dict) -> tuple[str | None, str | None]:
        """(the chat template the server renders with, the model's end-of-turn token), from the
        slot routes' payloads; None where the engine does not say."""
        return None, None

    def caps(self, payloads: dict) -> dict[str, tuple[bool, str]]:
        """claim -> (whether the served template supports it, where that was read), for
        `tools` and `reasoning_effort`, from the slot routes' payloads; {} where unsaid."""
        return {}

    def thinks(self, payloads: dict) -> tuple[bool, str] | None:
        """Whether the served chat template opens thinking at all, and where that was read,
        from the slot routes' payloads; None where the engine does not say."""
        return None

    def raised_at(self, message: str | None) -> str | None:
        """Where in the chat template an error answer says it raised ("line 3, column 12:
        <the source there>"); None where the engine's words do not say."""
        return None

    def call_family(self, payloads: dict) -> tuple[str, str] | None:
        """The tool-call family the served template selects (a key of call_family_markers)
        and where that was read; None where the engine does not show its template."""
        return None
