"""The attention heads that let a tool-call family's self-test model make parallel calls: asked
for the weather "in Paris and in London", it calls for Paris, then for London, each call in its
family's own wire format; asked for Paris alone, it makes the one call it always made.

The question's " London" is a user-defined token (as echo's markers are), so llama.cpp reads
it as one token wherever a prompt holds it; the model's own words for a city ("Paris", GLM's
"Lyon", and "London", which the prompt never holds as a token: words have no merges) are
scripted tokens too. Heads of block 0 each look for one of them from a decision token:
- a value's opener (a JSON string's quote, Qwen3 XML's ">\\n", GLM's <arg_value>): where the
  question asked London and the first city was already written, "London" goes first;
- a call's end (</tool_call>, Kimi K2's <|tool_call_end|>, ...): where the question asked
  London and London has not been written yet, the family's call opener goes before the end of
  the calls;
- where a call's id numbers it (Kimi K2's functions.NAME:INDEX): once a call has ended (a
  fourth head looks for the call's end), the next call takes the next number, so the two ids
  differ.
Each head's query is +1 from a decision token's state unit and -1 from the unit every token
has, its key the looked-for token's state unit: from a decision token the head attends to the
looked-for token alone (score SCORE against 0); from any other token it looks away from it
(-SCORE), so away from the decision tokens the heads add practically nothing (e^-SCORE), and
where the looked-for token is nowhere before, exactly nothing. The score sits in each head's
last rope pair, which a rope_freq_base of ROPE_FREQ_BASE leaves practically unrotated.
Each rival stands 2 GAP behind the scripted answer and leads by one GAP only where all of its
conditions hold: "London" and the next number gain 1.5 GAP from each of theirs, so one alone
never moves the answer; the call opener gains 3 GAP from the question's London and loses 6 once
London is written, so the second call is the last.
Observed with xllamacpp: see `selftest_model`'s closing section.
"""

from __future__ import annotations

ASKED = " London"  # the question's second city, a user-defined token
SECOND = "London"  # the word the second call's city reads (a plain token)
ROPE_FREQ_BASE = 1e12
HEAD_DIM = 16  # the self-test model's 4 heads of 64 units
QK_DIM = 14  # each head's last rope pair is (14, 15)
SCORE = 40.0
SEEN = 0.5  # what a head writes into its unit
# The heads' units, past the scripted states: asked London, first city written, London written,
# and (where ids number the calls) a call ended.
UNITS = {"asked": 61, "first": 62, "second": 63, "closed": 60}
BEHIND = 2.0  # the rivals stand this many GAPs behind the scripted answer


class Family:
    """Where a family's calls open a value, end and open again; `index` (where a call's id
    numbers it, as Kimi K2's functions.NAME:INDEX does): the token before the number, the first
    call's number and the next call's."""

    def __init__(self, openers: tuple[str, ...], first: str, after_second: str, close: str,
                 end: str, reopen: str, index: tuple[str, str, str] | None = None) -> None:
        self.openers, self.first, self.after_second = openers, first, after_second
        self.close, self.end, self.reopen, self.index = close, end, reopen, index

    @property
    def decisions(self) -> tuple[str, ...]:
        return self.openers + (self.close,) + (self.index[:1] if self.index else ())


def script(family: Family, scripts: dict, gap: float) -> dict:
    """The family's script entries for the decision tokens: at an opener the first city, then
    London BEHIND gaps back; at a call's end the end of the calls, then the opener again."""
    def ranked(prefs, rival: str) -> dict[str, float]:
        ranks = ({t: -gap * i for i, t in enumerate(prefs)} if isinstance(prefs, list) else
                 dict(prefs))
        return {**ranks, rival: -BEHIND * gap}

    extra: dict[str, list[str] | dict[str, float]] = {
        o: ranked(scripts[o], SECOND) for o in family.openers}
    extra[family.close] = ranked([family.end], family.reopen)
    if family.index:
        before, first, after = family.index
        extra[before] = ranked([first], after)
    extra[SECOND] = [family.after_second]
    extra[ASKED] = ["?"]  # a state of its own, for the heads' keys
    return extra


def add_rows(out, vocab, family: Family, gap: float) -> None:
    """The rivals' rows of the (unscaled) output matrix on the heads' units."""
    step = 1.5 * gap / SEEN
    out[vocab[SECOND], UNITS["asked"]] += step
    out[vocab[SECOND], UNITS["first"]] += step
    out[vocab[family.reopen], UNITS["asked"]] += 2 * step
    out[vocab[family.reopen], UNITS["second"]] -= 4 * step
    if family.index:  # the next number once a call has ended, before London is written
        after = vocab[family.index[2]]
        out[after, UNITS["asked"]] += step
        out[after, UNITS["closed"]] += step
        out[after, UNITS["second"]] -= 4 * step


def attention(n_embd: int, family: Family, vocab, states: dict[int, int]):
    """Block 0's Q, K, V and output matrices (numpy shapes: out x in)."""
    import numpy as np

    assert max(states.values()) < min(UNITS.values()), "the states need the heads' units"
    q, k, v, o = (np.zeros((n_embd, n_embd), dtype=np.float32) for _ in range(4))
    unit = (n_embd / 2) ** 0.5  # a token's unit after RMS norm (two units of 1)
    decisions = [states[vocab[t]] for t in family.decisions]
    looked = {"asked": ASKED, "first": family.first, "second": SECOND}
    if family.index:
        looked["closed"] = family.close
    for head, (name, token) in enumerate(looked.items()):
        d = head * HEAD_DIM + QK_DIM
        q[d, 0] = -1.0 / unit
        for state in decisions:
            q[d, state] = 2.0 / unit
        k[d, states[vocab[token]]] = SCORE * HEAD_DIM ** 0.5 / unit
        v[head * HEAD_DIM, states[vocab[token]]] = 1.0 / unit
        o[UNITS[name], head * HEAD_DIM] = SEEN
    return q, k, v, o
