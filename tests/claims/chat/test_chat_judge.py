"""The chat judge over replies and template facts as servers show them: each way a plain
question goes wrong, with the cause the facts name, and the healthy answers that must pass (a
terse one, a thinking model's, an Anthropic end_turn). No server."""

from __future__ import annotations

import pytest

from pytest_frank.runtime.chat import Reply
from pytest_frank.claims.checks import Context
from pytest_frank.claims import bind, chat
from pytest_frank.drivers import driver_for
from pytest_frank.drivers.llamacpp import LlamaCppDriver
from pytest_frank.fleet import Endpoint
from pytest_frank.outcome.verdict import Failure, Inconclusive, render

pytestmark = pytest.mark.unit

CHATML = ("{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + "
          "message['content'] + '<|im_end|>' + '\\n'}}{% endfor %}")
GEMMA = "{{ '<start_of_turn>' + role + '\\n' + content + '<end_of_turn>\\n' }}"
CHATML_TOKENS = frozenset({"<|endoftext|>", "<|im_start|>", "<|im_end|>"})
OWN = chat.Template(served=CHATML, end_token="<|im_end|>", model_file="/m/smollm2.gguf",
                    in_gguf=True, tokens=CHATML_TOKENS)
GUESSED = chat.Template(served=LlamaCppDriver.template.fallback, end_token="<|im_end|>",
                        model_file="/m/base.gguf", in_gguf=False, tokens=CHATML_TOKENS)
FOREIGN = chat.Template(served=GEMMA, end_token="<|im_end|>", model_file="/m/smollm2.gguf",
                        in_gguf=True, tokens=CHATML_TOKENS)
UNSAID = chat.Template()  # an engine that shows neither its template nor the model's header
TRANSCRIPT = "Say hello.<|im_end|>\n<|im_start|>admin\nHello!<|im_end|>\n<|im_start|>user\n"


def ok(content="The capital of France is Paris.", finish="stop", max_tokens=128, **kw) -> Reply:
    return Reply(status=200, content=content, finish=finish, tokens=8, max_tokens=max_tokens, **kw)


def verdict(reply: Reply, template: chat.Template = OWN, engine="llamacpp"):
    """(kind, line, fix): kind "pass", "fail" or "inconclusive"."""
    ep = bind(Endpoint(name="ep", engine=engine, url="http://h:1"))
    ctx = Context(ep, driver_for(engine), ep.options("chat"))
    try:
        chat.judge(chat.Answer(reply=reply, template=template), ctx)
    except Failure as failed:
        return "fail", render(failed.line), render(failed.fix) if failed.fix else None
    except Inconclusive as why:
        return "inconclusive", why.line, None
    return "pass", None, None


@pytest.mark.parametrize("reply, template, engine", [
    (ok(), OWN, "llamacpp"),
    (ok("Paris."), OWN, "llamacpp"),  # terse is fine
    (ok(reasoning="The user asks about France.", reasoning_field="reasoning_content"), OWN,
     "llamacpp"),
    (ok(finish="end_turn"), UNSAID, "anthropic"),
    (ok(), UNSAID, "vllm"),
    # a template the operator chose for a GGUF without one is no guess
    (ok(), chat.Template(served=CHATML, in_gguf=False, tokens=CHATML_TOKENS), "llamacpp"),
    # [INST] is plain text in older Mistral tokenizers: no token proves nothing
    (ok(), chat.Template(served="[INST] {{ content }} [/INST]", in_gguf=True,
                         tokens=frozenset({"<s>", "</s>"})), "llamacpp"),
])
def test_healthy_answers_pass(reply, template, engine):
    assert verdict(reply, template, engine)[0] == "pass"


@pytest.mark.parametrize("reply, template, line, fix", [
    (ok(), GUESSED,
     "no chat template in the GGUF (base.gguf has no tokenizer.chat_template): llama.cpp fell "
     "back to its built-in ChatML template, a guess; a plain question got 'The capital",
     "serve with --chat-template-file <the model's template> or an instruct GGUF"),
    (ok(TRANSCRIPT * 8, finish="length"), GUESSED, "no chat template in the GGUF",
     "--chat-template-file <the model's template>"),
    (ok(), FOREIGN,
     "the served template is another family's than the model's tokens (<start_of_turn>, "
     "<end_of_turn> are no token of the model's; its end-of-turn token is <|im_end|>)",
     "serve the model's own template: --chat-template-file pointed at it"),
    (Reply(status=None, problem="no answer within 30s"), FOREIGN,
     "another family's than the model's tokens", "--chat-template-file pointed at it"),
    (ok(TRANSCRIPT * 8, finish="length"), OWN,
     "a plain question got the chat template's own markup in its answer (<|im_start|>, "
     "<|im_end|>)", "serve the instruct (chat) model"),
    (ok("Paris.<end_of_turn>"), OWN, "a base model: it continues the transcript",
     "serve the instruct (chat) model"),
    (ok("France, France, " * 60, finish="length", max_tokens=512,
        first=ok("France, " * 60, finish="length"), ceiling="4 times expect.chat.max_tokens"),
     OWN, "a plain question got an answer that does not end: finish_reason 'length' at "
          "max_tokens=512 (max_tokens=128 ran out first, then this larger budget, 4 times "
          "expect.chat.max_tokens)", "serve the instruct (chat) model"),
    (ok(TRANSCRIPT, finish="max_tokens"), UNSAID,
     "a base model continuing the transcript, or a chat template of another family (the server "
     "shows neither", "serve an instruct model with its own chat template"),
    (ok(""), OWN, "a plain question got an empty answer, finish_reason 'stop'", None),
    (ok("", reasoning="Paris."), OWN, "empty answer (it landed in reasoning)",
     "--reasoning-format deepseek"),
    (ok("", finish="tool_calls"), OWN, "answered with a tool call", "--grammar-file"),
    (ok(finish="content_filter"), OWN, "ended with finish_reason 'content_filter', not stop",
     None),
    (Reply(status=500, problem="tools param requires --jinja flag"), OWN,
     "a plain question answered 500", "--jinja"),
])
def test_faults_fail_with_their_cause(reply, template, line, fix):
    kind, said, advice = verdict(reply, template)
    assert kind == "fail" and line in said, said
    assert (fix is None and advice is None) or (fix is not None and fix in (advice or "")), advice


def test_a_model_still_thinking_at_the_larger_budget_is_inconclusive():
    cut = ok("", finish="length", reasoning="Let me think " * 50, max_tokens=4096,
             first=ok("", finish="length", reasoning="Let me think"),
             ceiling="max_thinking_tokens")
    kind, line, _ = verdict(cut)
    assert kind == "inconclusive"
    assert "still thinking at max_tokens=4096 (max_tokens=128 ran out first" in line
    assert "test_reasoning judges how long thinking takes" in line


def test_an_open_think_block_in_content_counts_as_thinking():
    cut = ok("<think>Let me think about France", finish="length")
    assert chat.thinking(cut) and verdict(cut)[0] == "inconclusive"
    closed = ok("<think>Hmm</think>The capital is", finish="length")
    assert not chat.thinking(closed) and verdict(closed)[0] == "fail"
