"""The clients judge over recorded replies (the engines' and proxies' own words where they
refuse), the profiles' request shapes and the claim's options: no server."""

import json

import pytest

from pytest_frank.runtime.chat import Call, Reply
from pytest_frank.claims.checks import Context
from pytest_frank.claims import bind, declared
from pytest_frank.claims.clients import judge
from pytest_frank.claims.clients.play import Played, Step
from pytest_frank.claims.clients.profile import Choices
from pytest_frank.claims.clients.registry import PROFILES
from pytest_frank.drivers import driver_for
from pytest_frank.fleet import Endpoint, OptionError

pytestmark = pytest.mark.unit

Failed = pytest.fail.Exception
ANSWER = Reply(status=200, content="It is a shopping list.", finish="end_turn", prompt_tokens=900)


def played(client, first, second=ANSWER, context=49152, prompt=900, **choices):
    found = Played(client=client, first=PROFILES[client].first(Choices(request_kb=2, **choices)),
                   context=context, slots=1, prompt_tokens=prompt, counted_by="usage")
    found.steps = [Step("user", first)] + ([Step("user, assistant, tool", second)]
                                          if first.ok else [])
    return found


def verdict(obs, engine="llamacpp"):
    ep = bind(Endpoint("ep", engine, url="http://127.0.0.1:1", expect={"clients": True}))
    notes = []
    try:
        judge(obs, Context(ep, driver_for(engine), ep.options("clients"), obs.client,
                           notes.append))
    except Failed as exc:
        return str(exc.msg), notes
    return None, notes


def test_plain_answers_within_the_context_pass():
    assert verdict(played("pi", ANSWER))[0] is None


def test_a_call_breaking_a_keyword_the_grammar_ignored_fails_on_the_full_schema():
    # What llama.cpp did to Claude Code: minLength not enforced, the model wrote "".
    tool = PROFILES["claude_code"].first(Choices(request_kb=2)).tools[0]
    call = Call(tool["function"]["name"], json.dumps({"path": ""}), "toolu_1")
    said, _ = verdict(played("claude_code", Reply(status=200, calls=[call], finish="tool_use"),
                             context=65536))
    assert said.startswith("Claude Code (claude_code), its first request (14.") and \
        f"the call is not one Claude Code can use: invalid value: {tool['function']['name']}" \
        ".path: " in said, said
    assert "fix: the engine's constrained decoding left a keyword of the tool's schema " \
           "unenforced" in said, said


def test_a_uri_argument_that_is_no_uri_fails_on_the_full_schema():
    # format is not enforced by llama.cpp's grammar either; the client checks it.
    first = PROFILES["claude_code"].first(Choices(request_kb=2))
    tool = next(t for t in first.tools if "url" in t["function"]["parameters"]["properties"])
    fn = tool["function"]
    args = {**{k: "notes.txt" for k in fn["parameters"].get("required", [])}, "url": "not a uri"}
    call = Call(fn["name"], json.dumps(args), "toolu_1")
    said, _ = verdict(played("claude_code", Reply(status=200, calls=[call], finish="tool_use"),
                             context=65536))
    assert said is not None and f"{fn['name']}.url" in said and "uri" in said, said


# llama.cpp's answer to a template that raises (xllamacpp 2026.10, recorded): the Jinja trace
# with the template's line and source, then the template's own words.
RAISED = ("Unable to generate parser for this template. Automatic parser generation failed: \n"
          "------------\nWhile executing CallExpression at line 1, column 106 in source:\n"
          "...and not loop.first %}{{- raise_exception('System message must be at the "
          "beginnin...\n                                           ^\n"
          "Error: Jinja Exception: System message must be at the beginning.")


def test_late_system_message_refused_by_the_template_names_it_and_the_template_fix():
    said, _ = verdict(played("claude_code", Reply(status=400, problem=RAISED)))
    assert "answered 400: the chat template raised on a role: system message at the end of " \
           "messages (sent where the model name is not claude-*): Exception: System message " \
           "must be at the beginning. (template line 1, column 106: ...and not loop.first %}" \
           "{{- raise_exception('System message must be at the beginnin...)" in said, said
    assert "then serve the edited template: --chat-template-file <the edited file> (with " \
           "--jinja)" in said, said


def test_the_template_line_is_read_from_the_trace_folded_or_not():
    folded = " ".join(RAISED.split())
    assert driver_for("llamacpp").template.raised_at(folded) == driver_for(
        "llamacpp").template.raised_at(RAISED) == ("line 1, column 106: ...and not loop.first %}{{- "
                                              "raise_exception('System message must be at the "
                                              "beginnin...")


def test_the_same_refusal_of_a_client_sending_no_late_system_is_a_template_error():
    said, _ = verdict(played("opencode", Reply(status=500, problem="Jinja Exception: System "
                                                                  "message must be at the "
                                                                  "beginning.")))
    assert "the chat template could not render it (user)" in said, said


def test_prompt_plus_budget_over_the_context_is_named_in_tokens():
    said, _ = verdict(played("opencode", ANSWER, context=16384, prompt=5000))
    assert "5000 tokens of prompt (counted by usage) plus its output budget (max_tokens " \
           "32000) need 37000 tokens, over the 16384-token context" in said, said
    assert "--ctx-size 37888" in said, said


@pytest.mark.parametrize("said, tokens", [
    ("request (13870 tokens) exceeds the available context size (4096 tokens), try increasing "
     "it", 13870),
    ("This model's maximum context length is 4096 tokens. However, you requested 45870 tokens "
     "(13870 in the messages, 32000 in the completion). Please reduce the length.", 13870)])
def test_a_context_refusal_is_named_with_the_prompt_it_counted(said, tokens):
    from pytest_frank.claims.clients.play import PROMPT_WORDS

    assert next(int(m.group(1)) for p in PROMPT_WORDS if (m := p.search(said))) == tokens
    obs = played("claude_code", Reply(status=400, problem=said), context=4096, prompt=tokens)
    line, _ = verdict(obs)
    assert f"{tokens} tokens of prompt (counted by usage) plus its output budget (max_tokens " \
           f"32000) need {tokens + 32000} tokens, over the 4096-token context" in line, line


def test_a_route_the_server_does_not_serve_is_named():
    said, _ = verdict(played("codex", Reply(status=404, problem="File Not Found")))
    assert "Codex (codex), its first request (4.1 KB) on /v1/responses answered 404: the server " \
           "does not serve /v1/responses: File Not Found" in said, said
    assert "drop codex from expect.clients" in said


def test_empty_answer_to_the_tool_result_fails():
    call = Call("read_file", '{"path": "notes.txt"}', "call_1")
    first = Reply(status=200, calls=[call], finish="tool_calls", prompt_tokens=900)
    said, _ = verdict(played("pi", first, Reply(status=200, content="", finish="stop")))
    assert "its request carrying the tool result on /v1/chat/completions answered no text " \
           "and no call" in said, said


def test_claude_code_layout_follows_its_model_name():
    local = PROFILES["claude_code"].first(Choices())
    assert local.request.messages[-1]["role"] == "system" and 90_000 < local.size < 110_000
    assert local.request.max_tokens == 32000 and not local.request.sampling
    assert [b.get("cache_control") for b in local.request.extra["system"]] == [
        None, {"type": "ephemeral"}, {"type": "ephemeral"}]
    assert local.request.extra["extra_query"] == {"beta": "true"}
    claude = PROFILES["claude_code"].first(Choices(model="claude-sonnet-4-5"))
    assert claude.request.messages[-1]["role"] == "user"
    assert claude.request.extra["model"] == "claude-sonnet-4-5"


def test_each_profile_has_its_clients_size_and_sends_no_sampling():
    sizes = {name: p.first(Choices()).size / 1024 for name, p in PROFILES.items()}
    assert 38 < sizes["codex"] < 42 and 28 < sizes["opencode"] < 32 and 5 < sizes["pi"] < 6.5
    assert all(not p.first(Choices()).request.sampling for p in PROFILES.values())


def test_options_name_the_clients_and_refuse_unknown_ones():
    opts = bind(Endpoint("ep", "llamacpp", url="http://x", expect={"clients": [
        "pi", {"codex": {"request_kb": 4}}]})).options("clients")
    assert [n for n, _ in opts.clients] == ["pi", "codex"] and opts.of("codex").request_kb == 4
    with pytest.raises(OptionError, match="unknown client 'cursor'"):
        bind(Endpoint("ep", "llamacpp", url="http://x", expect={"clients": ["cursor"]}))
    with pytest.raises(OptionError) as err:
        bind(Endpoint("ep", "llamacpp", url="http://x", expect={"clients": [{"pi": {"kb": 1}}]}))
    assert err.value.key == "clients.pi.kb"


def test_fleet_file_errors_name_the_client_entry(tmp_path):
    from pytest_frank.fleet import FleetError, load

    def loaded(value):
        path = tmp_path / "fleet.yaml"
        path.write_text("endpoints:\n  ep:\n    url: http://127.0.0.1:1\n    engine: llamacpp\n"
                        f"    expect:\n      clients: {value}\n")
        return load(path, claims=declared())

    with pytest.raises(FleetError, match=r"expect.clients\[0\]: 'cursor' is not one of "
                                         "claude_code, codex, pi, opencode, openwebui"):
        loaded("[cursor]")
    with pytest.raises(FleetError, match=r"clients\[1\].pi: unknown key 'kb'"):
        loaded("[codex, {pi: {kb: 1}}]")
    assert loaded("[{pi: }]")["ep"].options("clients").of("pi") == Choices()
