"""The chat check on a real trained model (SmolLM2-135M-Instruct, ChatML) under real llama.cpp:
its own template passes under sampling, every time; another family's template, a base model's
behaviour and a GGUF with no template fail, each with the cause the server shows."""

from __future__ import annotations

import json
import time

import pytest
from proxy import Proxy

from fleets import one_endpoint
from pytest_frank.cli import main
from pytest_frank.gguf.reader import read_header

pytestmark = pytest.mark.real

# Another family's templates, as their models ship them (whitespace trimmed): under either,
# SmolLM2 sees turn markers that are no tokens of its own.
GEMMA = ("{{ bos_token }}{% for message in messages %}{% set role = 'model' if message['role'] "
         "== 'assistant' else message['role'] %}{{ '<start_of_turn>' + role + '\\n' + "
         "message['content'] | trim + '<end_of_turn>\\n' }}{% endfor %}{% if "
         "add_generation_prompt %}{{ '<start_of_turn>model\\n' }}{% endif %}")
LLAMA3 = ("{{ bos_token }}{% for message in messages %}{{ '<|start_header_id|>' + "
          "message['role'] + '<|end_header_id|>\\n\\n' + message['content'] | trim + "
          "'<|eot_id|>' }}{% endfor %}{% if add_generation_prompt %}{{ "
          "'<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}{% endif %}")
RUNS = 5  # sampled answers of the healthy model judged: none may fail
SAMPLED = {"temperature": 1.0, "seed": None}  # the fleet default is greedy
# The shared 2-core machine, loaded by other suites, can take a minute for 128 tokens: the
# answers are judged here, not the speed.
PATIENT = 300


@pytest.fixture
def run_fleet(run_fleet):
    return lambda fleet, *args, **kw: run_fleet(fleet, "-m", "chat", *args, **kw)


def test_smollm2_with_its_own_template_passes_every_time(smollm2, run_fleet):
    server = smollm2()
    passed, spent = 0, []
    for _ in range(RUNS):  # the server's default sampling: the answer differs run to run
        start = time.monotonic()
        result = run_fleet(one_endpoint(server.url, sampling=SAMPLED, timeout=PATIENT), "-v")
        spent.append(time.monotonic() - start)
        result.assert_outcomes(passed=1)
        result.stdout.fnmatch_lines(["*test_chat*PASSED*"])
        passed += 1
    print(f"chat on SmolLM2: {passed} of {RUNS} passed, {max(spent):.2f}s at most per run")


@pytest.mark.parametrize("template, marker", [(GEMMA, "<start_of_turn>"),
                                              (LLAMA3, "<|start_header_id|>")])
def test_another_familys_template_fails_naming_it(smollm2, run_fleet, tmp_path, template, marker):
    path = tmp_path / "template.jinja"
    path.write_text(template)
    server = smollm2(chat_template_file=str(path))
    # Sampled answers vary (some read well, some run on); the template's markers do not.
    result = run_fleet(one_endpoint(server.url, timeout=PATIENT))
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([
        "*the served template is another family's than the model's tokens "
        f"(*{marker}*no token of the model's; its end-of-turn token is <|im_end|>); a plain "
        "question got *",
        "*fix: serve the model's own template: --chat-template-file pointed at it*"])


def _endless_markup(request: dict, body: dict) -> dict:
    """A base model's answer: the question's transcript written on, turn after turn, until
    max_tokens runs out."""
    choices = body.get("choices")
    if not isinstance(choices, list) or not choices or "message" not in choices[0]:
        return body
    turn = "Say hello.<|im_end|>\n<|im_start|>admin\nHello!<|im_end|>\n<|im_start|>user\n"
    budget = request.get("max_tokens") or 128
    choices[0]["message"]["content"] = turn * (budget // 16)  # about 16 tokens a turn
    choices[0]["finish_reason"] = "length"
    body["usage"]["completion_tokens"] = budget
    return body


def test_a_base_models_transcript_fails_as_a_base_model(smollm2, run_fleet):
    server = smollm2()
    # The answers are rewritten (no engine here serves a base model's behaviour on demand);
    # /props and the GGUF behind the proxy are SmolLM2's own: its template is the model's.
    with Proxy(server.url, rewrite_answer=_endless_markup) as proxy:
        result = run_fleet(one_endpoint(proxy.url, timeout=PATIENT))
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([
        "*a plain question got the chat template's own markup in its answer (<|im_start|>, "
        "<|im_end|>)*a base model: it continues the transcript*",
        "*fix: serve the instruct (chat) model*"])


@pytest.fixture(scope="module")
def bare(smollm2_path, tmp_path_factory):
    """SmolLM2's GGUF, its header less tokenizer.chat_template: what a base GGUF looks like."""
    path = tmp_path_factory.mktemp("bare") / "no-template.gguf"
    _copy_without_template(smollm2_path, path)
    assert read_header(path).get("tokenizer.chat_template") is None
    return path


def test_a_gguf_without_a_template_gets_the_no_template_fix(bare, llama, run_fleet):
    server = llama(model=str(bare))
    # SmolLM2 is ChatML itself, so the guess answers well: the header shows it was a guess.
    result = run_fleet(one_endpoint(server.url, timeout=PATIENT))
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([
        "*no chat template in the GGUF (no-template.gguf has no tokenizer.chat_template): "
        "llama.cpp fell back to its built-in ChatML template, a guess; a plain question got *",
        "*fix: serve with --chat-template-file <the model's template> or an instruct GGUF*"])


def test_init_refuses_a_server_that_fails_the_chat_check(bare, llama, tmp_path, capsys):
    server = llama(model=str(bare))
    out = tmp_path / "fleet.yaml"
    started = time.monotonic()
    rc = main(["init", server.url, "-o", str(out), "--timeout", str(PATIENT)])
    print(f"frank init refused in {time.monotonic() - started:.2f}s")
    assert rc == 1 and not out.exists() and list(tmp_path.iterdir()) == []
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line.startswith(f"frank init: {server.url}: test_chat fails: no chat template in "
                           "the GGUF (no-template.gguf has no tokenizer.chat_template)"), line
    assert "; fix: serve with --chat-template-file <the model's template>" in line, line
    assert line.endswith("; nothing written"), line


def _copy_without_template(src, dst) -> None:
    import gguf

    reader = gguf.GGUFReader(str(src))
    writer = gguf.GGUFWriter(str(dst), reader.fields["general.architecture"].contents())
    for name, f in reader.fields.items():
        if name.startswith("GGUF.") or name in ("general.architecture", "tokenizer.chat_template"):
            continue
        writer.add_key_value(name, f.contents(), f.types[0],
                             f.types[-1] if f.types[0] == gguf.GGUFValueType.ARRAY else None)
    for t in reader.tensors:
        writer.add_tensor(t.name, t.data, raw_shape=t.data.shape, raw_dtype=t.tensor_type)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


def test_smollm2_budget_is_small(smollm2, run_fleet):
    """The probe's one request: within expect.chat.max_tokens, no tools, no schema."""
    server = smollm2()
    with Proxy(server.url) as proxy:
        run_fleet(one_endpoint(proxy.url, timeout=PATIENT)).assert_outcomes(passed=1)
    asked = [b for b in proxy.sent if "messages" in b]
    assert len(asked) == 1, json.dumps(asked)
    assert asked[0]["max_tokens"] == 128 and "tools" not in asked[0]
    assert "response_format" not in asked[0]
