"""chat: a plain question (no tools, no schema) gets a plain answer that ends by itself within a
small budget, with none of the chat template's own markup in it. The first generation of every
endpoint: a base model, or a model under another family's template, answers everything else
too, and every other check would judge that transcript as if it were chat.

The probe also reads what the server shows of its template (the served template, the model's
end-of-turn token, the GGUF header's own template and tokens): a template the engine guessed
(none in the GGUF) or one whose turn markers are no tokens of the model fails even where one
answer happens to read well, and a failing answer is told apart as a base model's."""

from __future__ import annotations

import os
from dataclasses import dataclass, field, replace

from pytest_frank.claims import Claim, option
from pytest_frank.claims import Options as ClaimOptions
from pytest_frank.claims.advice import advise
from pytest_frank.claims.checks import Check, Context
from pytest_frank.claims.replies import THINK_TAGS, one_line, reasoning_parser_fix, require_answer
from pytest_frank.claims.tools import forced_tools_fix
from pytest_frank.drivers import LlamaCppDriver, VllmDriver
from pytest_frank.drivers.base import Driver
from pytest_frank.drivers.protocols import Facts
from pytest_frank.outcome.observation import Observation, Unseen
from pytest_frank.outcome.verdict import Phrase, Text, fail, inconclusive
from pytest_frank.runtime.chat import Reply, Request, send, thinking_budget
from pytest_frank.runtime.target import first_and_alone
from pytest_frank.runtime.target import Target

PROMPT = "What is the capital of France? Answer in one short sentence."
# Chat templates' own markup: turn openers and closers, role headers, end-of-text tokens. None
# belongs in an answer; in one it means the model wrote the transcript on.
MARKUP = ("<|im_start|>", "<|im_end|>", "<start_of_turn>", "<end_of_turn>", "<|eot_id|>",
          "<|start_header_id|>", "<|end_header_id|>", "<|begin_of_text|>", "<|end_of_text|>",
          "[INST]", "[/INST]", "<|endoftext|>", "<|user|>", "<|assistant|>", "<|system|>",
          "<|end|>")
# The markup that is special tokens in every model of its family (ChatML, Gemma, Llama 3): a
# template using one the model's vocabulary lacks is another family's. ([INST], <|user|> and
# the like are plain text in some families' tokenizers, so they prove nothing.)
TOKEN_MARKUP = ("<|im_start|>", "<|im_end|>", "<start_of_turn>", "<end_of_turn>", "<|eot_id|>",
                "<|start_header_id|>", "<|end_header_id|>")
ENDED = ("stop", "end_turn")  # finish_reason / stop_reason of an answer that ended by itself
AGAIN = 4  # an answer cut at the budget is asked again with this many times the room


@dataclass(frozen=True)
class Options(ClaimOptions):
    max_tokens: int = option(128, minimum=1, about=(
        "The plain question's first budget; an answer cut at it is asked once more with 4 times "
        "the room. Default: 128."))


CLAIM = Claim("chat",
              "a plain question gets a plain answer that ends by itself", Options,
              order=30, always=True,
              tests=("test_chat",))


@dataclass
class Template:
    """What the server shows of the template it renders chat with."""

    served: str | None = None  # the template text the engine renders with
    end_token: str | None = None  # the model's end-of-turn token, as the engine reports it
    model_file: str | None = None  # the served GGUF, where it is readable here
    in_gguf: bool | None = None  # tokenizer.chat_template in its header; None: not read
    # Of TOKEN_MARKUP, what is one token of the model's vocabulary (read with in_gguf)
    tokens: frozenset[str] = field(default_factory=frozenset)

    def foreign(self) -> list[str]:
        """The served template's markup that is no token of the model (read from the GGUF)."""
        if not self.served or self.in_gguf is None:
            return []
        return [m for m in TOKEN_MARKUP if m in self.served and m not in self.tokens]


@dataclass(kw_only=True)
class Answer(Observation):
    reply: Reply
    template: Template = field(default_factory=Template)


@first_and_alone  # before the endpoint's other generations: chatting comes first
def answer(target: Target) -> Answer:
    opts = Options.on(target.endpoint)
    req = Request(PROMPT, opts.max_tokens)
    reply = send(target, req)
    if reply.ok and reply.cut and not markup(reply.content):
        reply = _again(target, req, reply)
    return Answer(reply=reply, template=_template(target))


def _again(target: Target, req: Request, cut: Reply) -> Reply:
    """Cut at the budget: ask once more with room to finish. A model still thinking gets what
    thinking may take (max_thinking_tokens, within the served context); one already answering,
    a few times the budget (a terse question's answer needs no more)."""
    if thinking(cut):
        budget, cut.ceiling = thinking_budget(target, cut)
    else:
        budget, cut.ceiling = AGAIN * req.max_tokens, f"{AGAIN} times expect.chat.max_tokens"
    if budget <= req.max_tokens:
        return cut
    again = send(target, replace(req, max_tokens=budget))
    again.first, again.ceiling = cut, cut.ceiling
    return again


def thinking(reply: Reply) -> bool:
    """Cut while thinking: reasoning and no answer, or a think block still open in content."""
    opened = reply.content.lstrip().startswith(THINK_TAGS[0]) and THINK_TAGS[1] not in \
        reply.content
    return reply.cut and (reply.thinking_cut or opened)


def markup(text: str) -> list[str]:
    return [m for m in MARKUP if m in text]


def _template(target: Target) -> Template:
    """The served template and end token (the slot routes), the GGUF header's own template and
    special tokens (where the served file is readable here)."""
    from pytest_frank.runtime.probes import slot_shape

    shape = target.need(slot_shape)
    payloads = {} if isinstance(shape, Unseen) else shape.payloads
    served, end = target.driver.template.served(payloads)
    found = Template(served=served, end_token=end)
    path = target.driver.served_model_path(payloads)
    if path and os.path.isfile(path):
        _read_gguf(path, found)
    return found


def _read_gguf(path: str, found: Template) -> None:
    from pytest_frank.gguf.reader import GGUFError, read_header

    try:
        header = read_header(path)
    except (GGUFError, OSError):
        return  # unread: the failure names no cause it cannot show
    vocab = header.get("tokenizer.ggml.tokens")
    if not isinstance(vocab, list):
        return  # no vocabulary to hold the template's markup against
    # Any token type: a converter may store a special token as a normal one.
    found.tokens = frozenset(set(TOKEN_MARKUP) & set(vocab))
    found.model_file = path
    found.in_gguf = isinstance(header.get("tokenizer.chat_template"), str)


def judge(seen: Answer, ctx: Context[Options]) -> None:
    """A plain question gets an answer that ends by itself, with no template markup in it."""
    r, t = seen.reply, seen.template
    _template_fault(t, ctx.driver, r)
    require_answer(r, ctx.driver, "a plain question")
    if thinking(r):
        inconclusive(f"the model was still thinking at max_tokens={r.max_tokens} "
                     f"({_tried(r)}): the answer is not judged here; test_reasoning judges "
                     f"how long thinking takes")
    found = markup(r.content)
    if found:
        cause, fix = _unfollowed(t)
        fail(f"a plain question got the chat template's own markup in its answer ("
             f"{', '.join(found)}): {one_line(r.content, 120)!r}, finish_reason {r.finish!r} "
             f"after {r.generated} tokens; {cause}", fix)
    if r.cut:
        cause, fix = _unfollowed(t)
        fail(f"a plain question got an answer that does not end: finish_reason {r.finish!r} "
             f"at max_tokens={r.max_tokens} ({_tried(r)}): {one_line(r.content, 120)!r}; "
             f"{cause}", fix)
    if r.tool_finish or r.calls:
        fail(f"a plain question with no tools was answered with a tool call (finish_reason "
             f"{r.finish!r})", forced_tools_fix(ctx.driver))
    if not r.content.strip():
        landed = " (it landed in reasoning)" if r.reasoning.strip() else ""
        fail(f"a plain question got an empty answer{landed}, finish_reason {r.finish!r} after "
             f"{r.generated} tokens",
             reasoning_parser_fix(ctx.driver) if landed else None)
    if r.finish not in ENDED:
        fail(f"a plain question's answer ended with finish_reason {r.finish!r}, not "
             f"{' / '.join(ENDED)}: {one_line(r.content, 120)!r}")
    ctx.note(f"answered {one_line(r.content, 80)!r} in {r.generated} tokens "
             f"(finish_reason {r.finish!r})")


def _tried(r: Reply) -> str:
    if r.first is None:
        return f"no larger budget to ask: {r.ceiling}" if r.ceiling else "asked once"
    return f"max_tokens={r.first.max_tokens} ran out first, then this larger budget, {r.ceiling}"


def _template_fault(t: Template, driver: Driver, r: Reply) -> None:
    """Fail on what the server shows of its template, whatever this one answer reads like: the
    engine's guess where the GGUF has none, or another family's turn markers."""
    found = _definite(t, driver)
    if found is None:
        return
    if not r.ok:
        said = f"no answer ({one_line(r.problem_line, 120)})"
    elif r.content.strip():
        said = f"{one_line(r.content, 80)!r}, finish_reason {r.finish!r}"
    else:
        said = f"an empty answer, finish_reason {r.finish!r}"
    fail(f"{found[0]}; a plain question got {said}", found[1])


def _definite(t: Template, driver: Driver) -> tuple[str, Text] | None:
    """No chat template in the GGUF (the engine guessed one), or a template of another family
    than the model's tokens; None where the server shows neither."""
    if t.in_gguf is False and t.served is not None and t.served == driver.template.fallback:
        fallback = f": {driver.template.fallback_line}" if driver.template.fallback_line else ""
        return (f"no chat template in the GGUF ({os.path.basename(t.model_file or '')} has no "
                f"tokenizer.chat_template){fallback}", no_template_fix(driver))
    foreign = t.foreign()
    if foreign:
        end = f"; its end-of-turn token is {t.end_token}" if t.end_token else ""
        return (f"the served template is another family's than the model's tokens "
                f"({', '.join(foreign)} {'is' if len(foreign) == 1 else 'are'} no token of "
                f"the model's{end})", wrong_template_fix(driver))
    return None


def _unfollowed(t: Template) -> tuple[str, Text]:
    """An answer that runs on under a template the server shows to be the model's own."""
    if t.in_gguf is not None and t.served:
        return ("a base model: it continues the transcript (the served template's markup is "
                "the model's own tokens, yet the model writes the turns on instead of ending "
                "its own)",
                "serve the instruct (chat) model; a base model cannot hold a conversation")
    return ("a base model continuing the transcript, or a chat template of another family "
            "(the server shows neither its template nor the model's header here)",
            "serve an instruct model with its own chat template")


CHAT = Check("test_chat", "chat", answer, judge)


# -- advice: the chat template by engine, named by the driver's flags ---------------------------
def no_template_fix(driver: Facts) -> Text:
    """For a model file that carries no chat template."""
    return advise(
        driver, "serve the model with its own chat template, or an instruct checkpoint that "
                "carries one",
        {LlamaCppDriver: lambda d: Phrase("serve with ", d.flags["template"]("<the model's template>"),
                                          " or an instruct GGUF (one whose header carries "
                                          "tokenizer.chat_template)")})


def wrong_template_fix(driver: Facts) -> Text:
    """For a template that is not the model's own (another family's)."""
    return advise(
        driver, "serve the model with its own chat template",
        {LlamaCppDriver: lambda d: Phrase("serve the model's own template: ", d.flags["template"],
                                          " pointed at it, or none (the GGUF's own is used)")})


def edited_template_fix(driver: Facts) -> Text:
    """How a chat template edited by hand is served (one that raises on what clients send)."""
    return advise(
        driver, "serve the edited template with the server's chat template setting",
        {LlamaCppDriver: lambda d: Phrase("serve the edited template: ",
                                          d.flags["template"]("<the edited file>"), " (with ",
                                          d.flags["jinja"], ")"),
         VllmDriver: "serve the edited template: vllm serve --chat-template <the edited file>"})
