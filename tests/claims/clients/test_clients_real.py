"""clients against real llama.cpp servers (xllamacpp, the self-test agent model): every client
profile passes on a healthy server; a template raising on a late system message fails the
clients that send one; small slots fail Claude Code's output budget, named in tokens; a strict
translation proxy fails exactly the profiles that send what it refuses.

Requests are shrunk with `request_kb` (the self-test tokenizer spends about a token a byte);
Claude Code's 24 tools keep its request near 14 KB whatever the option."""

import importlib.util
import json

import pytest
from fleets import one_endpoint
from proxy import Proxy

from pytest_frank.local.selftest_model import chat_template, write_model

pytestmark = pytest.mark.real

ALL = ("claude_code", "codex", "pi", "opencode", "openwebui")
RESPONSES = importlib.util.find_spec("pytest_frank.drivers.openai_responses") is not None
needs_responses = pytest.mark.skipif(not RESPONSES, reason="the Responses wire "
                                     "(pytest_frank.drivers.openai_responses) is not built")


def small(*names):
    return [{name: {"request_kb": 2}} for name in names]


def run(run_fleet, url, clients, *args):
    # Waiting as the clients do (Codex's stream idle timeout is 300 s): a profile's first request
    # is over 14 KB even at request_kb 2 (Claude Code's system blocks), which a loaded 2-core
    # machine can take past the default 30 s to evaluate on the self-test model.
    return run_fleet(one_endpoint(url, "llamacpp", timeout=300, expect={"clients": clients}),
                     "-p", "no:randomly", "-m", "clients", "--frank-json=run.json", *args)


def outcomes(pytester) -> dict:
    data = json.loads((pytester.path / "run.json").read_text())
    return {row["key"].split("[")[-1].rstrip("]").split("-", 1)[1]: row["verdict"]
            for row in data["rows"]}


@pytest.fixture(scope="session")
def long_model(tmp_path_factory):
    """The agent model with a 64K-token training context: room for Claude Code's budget."""
    return str(write_model(tmp_path_factory.mktemp("long") / "agent-64k.gguf", "agent",
                           ctx_train=65536))


@pytest.fixture
def healthy(llama, long_model):
    return llama(model=long_model, ctx_size=49152)


def test_healthy_server_passes_every_profile(healthy, run_fleet, pytester):
    names = ALL if RESPONSES else tuple(n for n in ALL if n != "codex")
    result = run(run_fleet, healthy.url, small(*names))
    result.assert_outcomes(passed=len(names))
    rows = json.loads((pytester.path / "run.json").read_text())["rows"]
    notes = "\n".join(note for row in rows for note in row["notes"])
    if RESPONSES:
        assert "turn 2 sent: developer [input_text], developer [input_text], user [input_text], " \
               "user [input_text], reasoning [reasoning_text], function_call, " \
               "function_call_output" in notes, notes
    assert "claude_code: first request 14." in notes, notes
    assert "prompt 1" in notes and "(usage)" in notes, notes
    assert "turn 2 sent: user [text, text], system, assistant [thinking, tool_use], " \
           "user [tool_result, text]" in notes, notes


def _late_system_raises(tmp_path):
    # As real templates do (Qwen3's "System message must be at the beginning."): a system or
    # developer message anywhere but first raises.
    raising = ("{%- for m in messages %}{%- if m.role in ['system', 'developer'] and not "
               "loop.first %}{{- raise_exception('System message must be at the beginning.') }}"
               "{%- endif %}{%- endfor %}\n" + chat_template("agent"))
    path = tmp_path / "late-system.jinja"
    path.write_text(raising)
    return str(path)


def test_template_raising_on_late_system_fails_claude_code_not_pi(llama, long_model, run_fleet,
                                                                  pytester, tmp_path):
    server = llama(model=long_model, ctx_size=49152,
                   chat_template_file=_late_system_raises(tmp_path))
    result = run(run_fleet, server.url, small("claude_code", "pi", "opencode"))
    assert outcomes(pytester) == {"claude_code": "FAIL", "pi": "pass", "opencode": "pass"}
    result.stdout.fnmatch_lines([
        "*Claude Code (claude_code), its first request (14.* KB) on /v1/messages answered *: the "
        "chat template raised on a role: system message at the end of messages (sent where the "
        "model name is not claude-*): *System message must be at the beginning. (template line "
        "1, column 106: *raise_exception(*",
        "*fix: edit the chat template so a system (developer) message that is not first renders*"
        "then serve the edited template: --chat-template-file <the edited file>*"])


def test_claude_model_name_sends_no_late_system(llama, long_model, run_fleet, tmp_path):
    server = llama(model=long_model, ctx_size=49152,
                   chat_template_file=_late_system_raises(tmp_path))
    result = run(run_fleet, server.url,
                 [{"claude_code": {"request_kb": 2, "model": "claude-sonnet-4-5"}}])
    result.assert_outcomes(passed=1)


@needs_responses
def test_template_raising_on_late_system_fails_codex(llama, long_model, run_fleet, pytester,
                                                     tmp_path):
    server = llama(model=long_model, ctx_size=49152,
                   chat_template_file=_late_system_raises(tmp_path))
    result = run(run_fleet, server.url, small("codex"))
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([
        "*Codex (codex), its first request (*) on /v1/responses answered *: the chat template "
        "raised on two developer input items after its instructions: *must be at the beginning*"])


def test_template_dropping_tool_results_fails_every_profile(llama, long_model, run_fleet,
                                                           pytester, tmp_path):
    # The agent model's template less its role-tool branch (llama.cpp renders tool_result blocks
    # and function_call_output items as role tool too): the result never reaches the prompt, so
    # the model calls again, as every real client then loops.
    deaf = chat_template().replace("message.role == 'tool'", "message.role == 'nobody'")
    assert deaf != chat_template()
    path = tmp_path / "deaf.jinja"
    path.write_text(deaf)
    server = llama(model=long_model, ctx_size=49152, chat_template_file=str(path))
    names = ALL if RESPONSES else tuple(n for n in ALL if n != "codex")
    result = run(run_fleet, server.url, small(*names))
    result.assert_outcomes(failed=len(names))
    assert set(outcomes(pytester).values()) == {"FAIL"}, outcomes(pytester)
    result.stdout.fnmatch_lines([
        "*pi (pi), its request carrying the tool result on /v1/chat/completions called * again "
        "with the same arguments (*) instead of answering: the result never reached the model, "
        "so pi would loop on it*",
        "*fix: the tool result did not reach the prompt: does the chat template render role "
        "tool*"])


def test_small_slots_fail_claude_code_naming_the_context(llama, long_model, run_fleet, pytester):
    server = llama(model=long_model, ctx_size=4096)
    result = run(run_fleet, server.url, small("claude_code", "openwebui"))
    assert outcomes(pytester) == {"claude_code": "FAIL", "openwebui": "pass"}
    result.stdout.fnmatch_lines([
        "*Claude Code (claude_code), its first request (14.* KB) on /v1/messages: 1???? tokens "
        "of prompt (counted by the refusal) plus its output budget (max_tokens 32000) need "
        "4???? tokens, over the 4096-token context each of the server's 1 slot(s) serves; it "
        "answered 400: *",
        "*fix: --parallel 1 --ctx-size 4???? *; or configure Claude Code with a smaller output "
        "budget*"])


def test_output_budget_alone_over_the_context_fails(healthy, run_fleet):
    # Accepted, yet the prompt plus 60000 tokens of answer cannot fit: judged by usage.
    result = run(run_fleet, healthy.url, [{"pi": {"request_kb": 2, "max_tokens": 60000}}])
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([
        "*pi (pi), its first request (*) on /v1/chat/completions: * tokens of prompt (counted "
        "by usage) plus its output budget (max_completion_tokens 60000) need * tokens, over the "
        "49152-token context*"])


# An emulator of what strict translation proxies do (LiteLLM-style gateways that validate a
# request before translating it): no engine here refuses either field.
def _arrays(body):
    for i, m in enumerate(body.get("messages", [])):
        if isinstance(m.get("content"), list):
            return f"messages[{i}].content: expected string, got array"
    return "system: expected string, got array" if isinstance(body.get("system"), list) else None


def _cache_control(body):
    return "cache_control: Extra inputs are not permitted" if "cache_control" in json.dumps(body) \
        else None


def test_proxy_refusing_array_content_fails_the_profiles_sending_it(healthy, run_fleet,
                                                                    pytester):
    with Proxy(healthy.url, refuse=_arrays) as proxy:
        result = run(run_fleet, proxy.url, small("claude_code", "pi", "opencode", "openwebui"))
    assert outcomes(pytester) == {"claude_code": "FAIL", "pi": "FAIL", "opencode": "pass",
                                  "openwebui": "pass"}
    result.stdout.fnmatch_lines([
        "*pi (pi), its first request (*) on /v1/chat/completions answered 400 to content as "
        "arrays (user content as an array of text blocks): messages?1?.content: expected "
        "string, got array",
        "*fix: a translation proxy in front takes only string content*"])


def test_proxy_refusing_cache_control_fails_claude_code_alone(healthy, run_fleet, pytester):
    with Proxy(healthy.url, refuse=_cache_control) as proxy:
        result = run(run_fleet, proxy.url, small("claude_code", "pi", "opencode"))
    assert outcomes(pytester) == {"claude_code": "FAIL", "pi": "pass", "opencode": "pass"}
    result.stdout.fnmatch_lines([
        "*Claude Code (claude_code), its first request (*) on /v1/messages answered 400 to "
        "cache_control (cache_control on system and user text blocks): cache_control: Extra "
        "inputs are not permitted",
        "*fix: a translation proxy in front refuses cache_control*"])


def test_init_offers_the_clients_whose_route_answers_and_request_fits(llama, tmp_path_factory):
    # The default self-test model (init's chat gate wants a plain answer to a plain question).
    from pytest_frank.init.survey import survey

    model = write_model(tmp_path_factory.mktemp("long") / "default-64k.gguf", ctx_train=65536)
    roomy = survey(llama(model=str(model), ctx_size=49152).url, None, 60, 10, perf=False)
    # The self-test tokenizer spends a token a byte: Claude Code's 96 KB and opencode's 30 KB
    # with their 32000-token budgets do not fit 49152 tokens; the others do.
    assert roomy.claims["clients"].value == (["codex"] if RESPONSES else []) + ["pi", "openwebui"]
    # each profile was played on the server, every turn counted, before it was written
    assert roomy.claims["clients"].why.startswith("/v1/chat/completions") and \
        "answered; each played and passed here; every turn fits the 49152-token context per " \
        "slot (prompt tokens by turn: " in roomy.claims["clients"].why, roomy.claims["clients"].why
    # each profile left out has a line of its own saying why
    assert roomy.notes["clients"].startswith("left out:\nclaude_code (its typical first request "
                                             "and output budget need ~1"), roomy.notes
    assert "\nopencode (" in roomy.notes["clients"]
    small_slots = survey(llama().url, None, 60, 10, perf=False)
    assert small_slots.claims["clients"].value == ["openwebui"]
    assert "claude_code (its typical first request and output budget need ~" in \
        small_slots.notes["clients"], small_slots.notes


def test_a_client_is_waited_for_as_long_as_it_waits_and_says_so(healthy, run_fleet, pytester):
    """A proxy holds each generation 5 s, as a long prompt's processing would, in front of an
    endpoint whose timeout is 3 s: pi waits minutes for an answer to begin, and so does its
    profile, which passes and says how long it waited and when each answer began."""
    with Proxy(healthy.url, hold_s=5) as proxy:
        result = run_fleet(one_endpoint(proxy.url, "llamacpp", timeout=3,
                                        expect={"clients": small("pi")}),
                           "-p", "no:randomly", "-m", "clients", "--frank-json=run.json")
    assert outcomes(pytester) == {"pi": "pass"}, result.stdout.str()[-3000:]
    notes = [n for row in json.loads((pytester.path / "run.json").read_text())["rows"]
             for n in row["notes"]]
    assert ("each turn waited up to 300 s for its answer to begin, as pi does (httpIdleTimeoutMs, "
            "default 300000), within the battery's 600 s and the endpoint's deadline") in notes
    began = [float(n.split("it began after ")[1].split(" s")[0]) for n in notes
             if "it began after" in n]
    assert len(began) == 2 and all(b >= 5 for b in began), notes


def test_a_client_waits_no_longer_than_the_endpoints_deadline(healthy, run_fleet):
    """The battery's own bound: a first answer held past the endpoint's deadline is cut there,
    not after the client's five minutes."""
    with Proxy(healthy.url, hold_s=30) as proxy:
        result = run_fleet(one_endpoint(proxy.url, "llamacpp", timeout=3, deadline=6,
                                        expect={"clients": small("pi")}),
                           "-p", "no:randomly", "-m", "clients")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*the endpoint's deadline (6s, fleet.yaml deadline) ran out "
                                 "before the answer began*",
                                 "*fix: the endpoint's deadline (6s, fleet.yaml deadline) ended "
                                 "this answer before any of it came*raise `deadline` for this "
                                 "endpoint in fleet.yaml*"])
    # cut at the deadline, not after pi's 300 s: the endpoint's whole time to its verdict
    spent = float(result.stdout.str().split(" s to verdict")[0].rsplit(", ", 1)[1])
    assert spent < 6 + 1, spent


def test_a_plain_first_answer_is_followed_by_an_earlier_call_and_its_result(llama, run_fleet,
                                                                              pytester):
    # The default model answers "Hello!" under tool_choice auto: turn 2 carries an earlier call
    # of the first tool and its result, as a client's history holds one, and is answered.
    result = run(run_fleet, llama().url, small("openwebui", "opencode"))
    assert outcomes(pytester) == {"openwebui": "pass", "opencode": "FAIL"}
    notes = "\n".join(n for row in json.loads((pytester.path / "run.json").read_text())["rows"]
                      for n in row["notes"])
    assert "turn 1 came back: finish stop, content 'Hello!'" in notes, notes
    assert "turn 2 sent: system, user, assistant (1 tool_call(s)), tool" in notes, notes
    assert "turn 1 answered in text: turn 2 carries an earlier call" in notes, notes
    # opencode's 12 tools alone outgrow the 4096-token slot (the self-test tokenizer: a token
    # a byte), and its 32000-token budget would anyway.
    result.stdout.fnmatch_lines(["*opencode (opencode), its first request (*) on "
                                 "/v1/chat/completions: * tokens of prompt (counted by the "
                                 "refusal) plus its output budget (max_tokens 32000) need *"])
