"""The chat check before anything is written: a server that cannot answer a plain question
(a base model, a template the engine guessed or of another family) gets no fleet file, as a
dead URL gets none; the battery on such a file would judge a transcript as if it were chat."""

from __future__ import annotations

from pytest_frank.claims import chat
from pytest_frank.claims.checks import Context
from pytest_frank.init.found import InitError
from pytest_frank.outcome.observation import Unseen
from pytest_frank.outcome.verdict import Failure, Inconclusive
from pytest_frank.runtime.target import Target


def require_chat(target: Target) -> None:
    """InitError, one line, where the chat check fails on the server; an inconclusive one (a
    model still thinking at the budget) lets the survey go on."""
    seen = target.need(chat.answer)
    try:
        if isinstance(seen, Unseen) or seen.failure:
            raise Failure(seen.failure or "the chat probe broke", seen.fix)
        chat.judge(seen, Context(target.endpoint, target.driver, chat.Options.on(target.endpoint)))
    except Inconclusive:
        return
    except Failure as failed:
        line = " ".join(failed.message().replace("\n  fix: ", "; fix: ").split())
        raise InitError(f"{target.endpoint.url}: test_chat fails: {line}") from None
