"""Error answers, and failed starts' logs, with a known cause: the usual fix by the server's
words, else by its status. The words are the engines' own; a fix names the flag in the engine's
own spelling where its driver knows it (`driver.flags`, `driver.start`)."""

from __future__ import annotations

from pytest_frank.drivers.base import Driver
from pytest_frank.outcome.verdict import Phrase, Text

STATUS_FIXES = {
    401: "the server wants a key: set `api_key` for this endpoint in fleet.yaml (e.g. "
         "api_key: ${ENDPOINT_KEY}), or check the one set there",
    403: "the server refused the key: check `api_key` for this endpoint in fleet.yaml",
    404: "nothing of the engine's answers on that path: check `url` in fleet.yaml (host, port, "
         "and whether a proxy expects a path before /v1) and `engine`",
    **dict.fromkeys((301, 302, 303, 307, 308), "set `url` in fleet.yaml to where the redirect "
                    "points, if that host is the endpoint"),
}

JINJA_OFF = " (the chat template renders the tools; a wrapper or an old build turned it off)"


def known_errors(driver: Driver) -> tuple[tuple[str, Text], ...]:
    """(text in the server's message, fix), first match wins."""
    jinja = driver.flags.get("jinja")
    return (
        ("tools param requires --jinja", Phrase(driver.start, jinja, JINJA_OFF)
         if jinja is not None and driver.start is not None
         else "start llama-server with --jinja" + JINJA_OFF),
        ('"auto" tool choice requires --enable-auto-tool-choice',
         "start vLLM with --enable-auto-tool-choice --tool-call-parser <the model's parser, "
         "e.g. hermes, qwen3_xml, qwen3_coder>"),
        ("requires --tool-call-parser", "start vLLM with --tool-call-parser <the model's parser>"),
        ("invalid tool_choice", "this server accepts only tool_choice auto, none or required"),
        # a failed start's log (driver.launch.start_failure says what it means)
        ("model doesn't contain MTP layers", _no_mtp_head(driver)),
    )


def _no_mtp_head(driver: Driver) -> Text:
    """Either give llama.cpp a head to draft from or stop asking for one."""
    # The flag unvalued: "drop" mentions it, and a valued one in effect would drop the fix.
    spec_type = driver.flags.get("spec_type") or "--spec-type"
    return Phrase("serve the model's -mtp GGUF (the file with its NextN head), or stop asking "
                  "for draft-mtp (drop ", spec_type, ") to serve this file without drafting")


# runtime.chat's words for a 2xx whose field is of a type its API never sends: the template
# and parser decide what a reply says, never a field's type, so what wrote the reply is at fault
UNREADABLE = "a field of a type its API never sends"
UNREADABLE_FIX = ("what wrote the reply is at fault, not the model or its template: a gateway or "
                  "proxy in front that rewrites replies or streams, or the engine's writer; "
                  "compare the engine's own reply without what is in front, pass replies "
                  "through unchanged, and update the engine")


def known_fix(driver: Driver, message: str | None, status: int | None = None) -> Text | None:
    """The usual fix for an error answer: by the server's words, else by its status."""
    lower = (message or "").lower()
    if UNREADABLE.lower() in lower:
        return UNREADABLE_FIX
    found = next((fix for needle, fix in known_errors(driver) if needle.lower() in lower), None)
    return found or (STATUS_FIXES.get(status) if status is not None else None)
