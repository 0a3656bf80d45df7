"""agent over the Responses API's own ways of carrying a loop, which a chat route never sees:
a function_call_output whose output is a list of content parts (the API allows it, and a
server that takes only a string refuses it or drops its text), `previous_response_id` naming
a stored response whose function_call items the next turn answers (vLLM 43244 lost them), and
tools that are not functions (web_search, custom: Codex offers both) beside the functions,
which a server must skip or refuse in words a client shows (llama.cpp 20156 answered 500).

Asked where an endpoint's route is /v1/responses. The array-shaped output is the plain agent
conversation's turn 2 again with each output as input_text parts (one generation, judged
against the string twin's prompt tokens); the tools beside the functions ask turn 1 of the
chain (store: true), and the chain's turn 2 names it by id: three generations in all. Where
test_agent_streamed is asked (`stream`), the chain's turn 2 is asked streamed as well, as Codex
asks it, naming the same stored turn 1 (one generation more): a gateway whose streaming path
brings the stored response back without its function_call items breaks streaming clients
alone."""

from __future__ import annotations

from dataclasses import dataclass, field

from pytest_frank.claims import agent
from pytest_frank.claims.agent import Options, Problem, Turn, answer_problem, held
from pytest_frank.claims.checks import Check, Context
from pytest_frank.claims.replies import one_line
from pytest_frank.claims.tools import PROMPTS, TOOLS
from pytest_frank.outcome.observation import Observation, Unseen
from pytest_frank.outcome.verdict import fail
from pytest_frank.drivers.base import Driver
from pytest_frank.runtime.chat import Reply, Request, send, think_through
from pytest_frank.runtime.target import Target

# What Codex offers beside its functions: OpenAI's hosted search, and a freeform tool.
OTHER_TOOLS = [{"type": "web_search"},
               {"type": "custom", "name": "apply_patch",
                "description": "Apply a patch to the files of the repository."}]
# A server that keeps no responses says so: llama.cpp "does not support 'previous_response_id'",
# vLLM without its store "Response with id ... not found".
NOT_STORED = ("not support", "not found", "store")
# Fewer prompt tokens than the string twin by this many: the output's text was left out (the
# result is a JSON object of some 30 tokens or more on any tokenizer; a template's wrapping of
# a list differs from a string's by a few).
DROPPED_TOKENS = 10
ARRAY_FIX = ("the Responses API takes a function_call_output's output as a string or as a list "
             "of content parts (input_text, input_image), and Codex and the Agents SDK send "
             "both: the server (or a gateway in front) must read the list's text into the tool "
             "result; update the engine, or make the gateway pass the list on")
CHAIN_FIX = ("previous_response_id must bring back the stored response whole, its "
             "function_call items with it, for the function_call_output items to answer them "
             "(vLLM 43244 lost them): update the engine, or send the whole history with "
             "store: false, as Codex does")
TOOLS_FIX = ("a client offers tools that are not functions (web_search, custom) as OpenAI "
             "serves them: the server must leave out the types it does not run, or refuse "
             "them with a 400 whose message names them (llama.cpp answered 500 before its fix "
             "of issue 20156): update the engine, or have the gateway in front drop those "
             "tools")


@dataclass(kw_only=True)
class Chain(Observation):
    plain: Turn | None = None  # the plain conversation's turn 1 (its calls)
    twin: Turn | None = None  # the plain conversation's turn 2: outputs as strings
    array: Turn | None = None  # the same history, each output a list of input_text parts
    offered: Turn | None = None  # turn 1 with web_search and custom beside the functions
    first: Turn | None = None  # the chain's turn 1 (stored): `offered`, or asked again
    chained: Turn | None = None  # turn 2 by previous_response_id
    streamed: Turn | None = None  # the same turn 2 asked streamed
    # turn 2 with the user's turn, the calls and their outputs sent whole (no reasoning), one
    # token asked: the prompt the chain's stored items must at least make up
    whole: Turn | None = None
    not_asked: list[str] = field(default_factory=list)


def _as_parts(item: dict) -> dict:
    if item.get("type") != "function_call_output" or not isinstance(item.get("output"), str):
        return item
    return {**item, "output": [{"type": "input_text", "text": item["output"]}]}


def chain(target: Target) -> Chain:
    opts = Options.on(target.endpoint)
    think = target.endpoint.asks("reasoning")
    found = Chain()

    def ask(prompt: str, messages: list[dict] | None = None, choice: str = "auto",
            extra: dict | None = None, stream: bool = False) -> Turn:
        req = Request(prompt, opts.max_tokens, tools=TOOLS, tool_choice=choice,
                      messages=messages, extra=extra or {}, think=think, stream=stream)
        return Turn(sent=messages or [{"role": "user", "content": prompt}],
                    reply=think_through(target, req))

    plain = target.need(agent.plain)
    turns = [] if isinstance(plain, Unseen) else plain.trials[0]
    if len(turns) > 1 and turns[0].reply.calls:
        found.plain, found.twin = turns[0], turns[1]
        found.array = ask("", [_as_parts(item) for item in turns[1].sent])
    else:
        found.not_asked.append("the array-shaped output (test_agent's turn 1 made no call)")
    # Turn 1 with the other tools beside the functions (in the body's own `tools`, as the
    # wire sends the functions), kept for the chain where it was taken.
    found.offered = ask(PROMPTS["required"], choice="required",
                        extra={"store": True, "tools": [*OTHER_TOOLS, *_functions()]})
    # (a server that ran a hosted tool instead made no call to answer: asked again without)
    found.first = found.offered if found.offered.reply.calls else ask(
        PROMPTS["required"], choice="required", extra={"store": True})
    first = found.first.reply
    if first.ok and first.calls and first.response_id:
        outputs = [{"type": "function_call_output", "call_id": c.id,
                    "output": agent._result(c, 0)[0]} for c in first.calls]
        found.chained = ask("", outputs, extra={"previous_response_id": first.response_id})
        if found.chained.reply.ok and opts.stream:
            found.streamed = ask("", outputs, stream=True,
                                 extra={"previous_response_id": first.response_id})
        if found.chained.reply.ok:
            calls = [{"type": "function_call", "name": c.name, "arguments": c.arguments,
                      "call_id": c.id} for c in first.calls]
            sent = [*found.first.sent, *calls, *outputs]
            found.whole = Turn(sent=sent, reply=send(target, Request(
                "", 1, tools=TOOLS, tool_choice="auto", messages=sent, think=think)))
    else:
        found.not_asked.append(f"previous_response_id (turn 1 {_why_not(first)})")
    return found


def _functions() -> list[dict]:
    """The functions as the Responses wire sends them."""
    return [{"type": "function", "name": t["function"]["name"],
             "description": t["function"]["description"],
             "parameters": t["function"]["parameters"], "strict": False} for t in TOOLS]


def _why_not(reply: Reply) -> str:
    if not reply.ok:
        return one_line(reply.problem_line, 160)
    return "made no call" if not reply.calls else "came back without a response id"


# -- judging ---------------------------------------------------------------------------------
def _offered_problem(turn: Turn) -> Problem | None:
    """web_search and custom beside the functions: taken (skipped), or refused in words."""
    reply = turn.reply
    if reply.ok:
        return None
    said = one_line(reply.problem or "", 200)
    if reply.status is None:
        return Problem(f"offered web_search and a custom tool beside the functions, no answer "
                       f"came back: {said}", TOOLS_FIX)
    if reply.status >= 500:
        return Problem(f"offered web_search and a custom tool beside the functions, the server "
                       f"answered {reply.status}: {said}: a client shows an internal error "
                       f"instead of a reason", TOOLS_FIX)
    if not said.strip():
        return Problem(f"offered web_search and a custom tool beside the functions, the server "
                       f"answered {reply.status} without a message: a client cannot show why",
                       TOOLS_FIX)
    return None


def _array_problem(found: Chain, driver: Driver) -> Problem | None:
    assert found.plain is not None and found.twin is not None and found.array is not None
    reply, twin = found.array.reply, found.twin.reply
    if answer_problem([found.plain, found.twin], driver) is not None:
        return None  # the outputs as strings fail too: test_agent names why, not the shape
    if not reply.ok:
        return Problem(f"turn 2 with each function_call_output's output as a list of input_text "
                       f"parts ({held(found.array)}) {one_line(reply.problem_line, 240)}, "
                       f"where the same outputs as strings were answered", ARRAY_FIX)
    problem = answer_problem([found.plain, found.array], driver)
    if problem is not None:
        return Problem(f"with the output as a list of input_text parts, {problem.text}",
                       problem.fix or ARRAY_FIX)
    if _short(reply.prompt_tokens, twin.prompt_tokens):
        return Problem(f"turn 2 with each output as a list of input_text parts was "
                       f"{reply.prompt_tokens} prompt tokens, the same history with the "
                       f"outputs as strings {twin.prompt_tokens}: the list's text never "
                       f"reached the prompt (the answer was written without the tool result)",
                       ARRAY_FIX)
    return None


def _short(prompt: int | None, whole: int | None) -> bool:
    """A prompt counted short of what its whole twin was counted by DROPPED_TOKENS or more."""
    return prompt is not None and whole is not None and whole - prompt >= DROPPED_TOKENS


def _stores(reply: Reply) -> bool:
    """Whether a refused chain says the server keeps no responses (not a lost call)."""
    lower = (reply.problem or "").lower()
    return ((reply.status in (400, 404, 501) and "previous_response" in lower
             and any(w in lower for w in NOT_STORED))
            or (reply.status == 404 and "not found" in lower))


def _chain_problem(found: Chain, driver: Driver, ctx: Context[Options],
                   streamed: bool = False) -> Problem | None:
    """Turn 2 by previous_response_id (`streamed`: the same turn asked streamed, once the
    plain one was answered)."""
    turn = found.streamed if streamed else found.chained
    assert found.first is not None and turn is not None
    reply, how = turn.reply, ", streamed," if streamed else ""
    if not reply.ok and reply.status is not None and _stores(reply) and not streamed:
        ctx.note(f"previous_response_id: turn 1 (sent with store: true) is not kept here, and "
                 f"the server says so ({one_line(reply.problem_line, 160)}): not judged; a "
                 f"client that chains by id (the OpenAI Agents SDK) must send the whole "
                 f"history to this endpoint")
        return None
    plain = "; unstreamed, the same turn passed: only the streaming path breaks it" \
        if streamed else ""
    if not reply.ok:
        return Problem(f"turn 2 by previous_response_id{how or ','} answering turn 1's "
                       f"{len(found.first.reply.calls)} call(s) with function_call_output "
                       f"items alone, {one_line(reply.problem_line, 240)}{plain}", CHAIN_FIX)
    problem = answer_problem([found.first, turn], driver)
    if problem is not None:
        return Problem(f"turn 2 by previous_response_id{how.rstrip(',')}: {problem.text}{plain}",
                       CHAIN_FIX if "again" in problem.text else problem.fix)
    whole = found.whole.reply if found.whole is not None else None
    if whole is not None and whole.ok and _short(reply.prompt_tokens, whole.prompt_tokens):
        return Problem(f"turn 2 by previous_response_id{how.rstrip(',')} was "
                       f"{reply.prompt_tokens} prompt tokens, the same turn with the user's "
                       f"message, the call(s) and their outputs sent whole "
                       f"{whole.prompt_tokens} (without the reasoning): the stored response "
                       f"came back without its function_call items, so the model read results "
                       f"of calls it never made"
                       + (f"; unstreamed, turn 2 was {found.chained.reply.prompt_tokens}: "
                          f"only the streaming path loses them"
                          if streamed and found.chained is not None else ""), CHAIN_FIX)
    return None


def judge(found: Chain, ctx: Context[Options]) -> None:
    """Each way of carrying the loop is taken, or said plainly not to be kept (the store)."""
    driver = ctx.driver
    for turn, what in ((found.array, "array-shaped output"), (found.offered, "other tools"),
                       (found.chained, "previous_response_id"),
                       (found.streamed, "previous_response_id, streamed"),
                       (found.whole, "the chain's turn 2 sent whole")):
        if turn is not None:
            came = turn.reply.problem_line if not turn.reply.ok else (
                f"finish {turn.reply.finish}, "
                + (f"calls {', '.join(str(c.name) for c in turn.reply.calls)}"
                   if turn.reply.calls else f"content {one_line(turn.reply.content, 60)!r}")
                + f", {turn.reply.prompt_tokens} prompt tokens")
            ctx.note(f"{what}: sent {held(turn)}; came back: {one_line(came, 200)}")
    for what in found.not_asked:
        ctx.note(f"not asked: {what}")
    problems = []
    if found.twin is not None and found.array is not None:
        problems.append(_array_problem(found, driver))
    if found.offered is not None:
        problems.append(_offered_problem(found.offered))
    if found.chained is not None:
        problems.append(_chain_problem(found, driver, ctx))
    if found.streamed is not None:
        problems.append(_chain_problem(found, driver, ctx, streamed=True))
    first = next((p for p in problems if p is not None), None)
    if first is not None:
        fail(f"agent chain on /v1/responses: {first.text}", first.fix)


CHAIN = Check("test_agent_chain", "agent", chain, judge,
              # the Responses route's own: collected only where an endpoint generates on it
              asked=lambda opts: False,
              asked_of=lambda endpoint: endpoint.api == "responses",
              when="where `api: responses`")
