"""Real coding agents (pi, Codex, Claude Code; tests/support/real_clients.py) against real llama.cpp
servers on the self-test agent model: what each sends, and how each fares healthy, under a
template that raises on a late system message, and under the agent claim's two turn-2 faults."""

import json

import pytest
from fleets import one_endpoint

pytestmark = pytest.mark.real

CLIENTS = ("pi", "codex", "claude")
SCENARIOS = ("healthy", "late_system", "tool_raises", "tool_dropped")
# How each client is run per scenario, where not as it comes: a run whose model never answers is
# stopped at its third request; Claude Code gets its Agent tool where the late system message it
# brings is the point (elsewhere the self-test model calls it, and its sub-agent, forever).
RUNS: dict = {client: {"tool_dropped": {"max_generations": 2}} for client in CLIENTS}
RUNS["claude"]["late_system"] = {"tools": "Bash,Agent"}
# The clients claim's profile for each real client (pytest_frank/claims/clients/).
PROFILE = {"pi": "pi", "codex": "codex", "claude": "claude_code"}


def run(coding_agent, client, scenario, record_property, **options):
    done = coding_agent(client, scenario, **options)
    record_property("outcome", done.outcome())
    print(done.outcome())
    return done


def sent(done, turn):
    return done.generations[turn]["body"]


def test_pi_healthy_sends_its_chat_shape(coding_agent, record_property):
    done = run(coding_agent, "pi", "healthy", record_property)
    assert done.answered, done.describe()
    assert [(e["path"], e["status"]) for e in done.generations] == \
        [("/v1/chat/completions", 200)] * 2, done.describe()
    first, second = sent(done, 0), sent(done, 1)
    assert first["max_completion_tokens"] == 4096
    assert first["store"] is False and first["stream"] is True
    assert first["stream_options"] == {"include_usage": True}
    assert first["messages"][0]["role"] == "developer"  # a reasoning model's system prompt
    assert first["messages"][1] == {"role": "user", "content": [{"type": "text",
                                                                  "text": "Say hello"}]}
    assert {t["function"].get("strict") for t in first["tools"]} == {False}
    assert not {"temperature", "top_p", "top_k", "min_p"} & set(first)  # the server's sampling
    assistant = second["messages"][2]
    assert assistant["content"] is None and assistant["tool_calls"]
    assert [m["role"] for m in second["messages"]] == ["developer", "user", "assistant", "tool"]


def test_codex_healthy_sends_the_responses_shape(coding_agent, record_property):
    done = run(coding_agent, "codex", "healthy", record_property)
    assert done.answered, done.describe()
    assert [(e["path"], e["status"]) for e in done.generations] == \
        [("/v1/responses", 200)] * 2, done.describe()
    first, second = sent(done, 0), sent(done, 1)
    roles = [item.get("role") for item in first["input"]]
    assert roles[:2] == ["developer", "developer"] and roles[-1] == "user", roles
    assert all(item["type"] == "message" for item in first["input"])
    functions = [t for t in first["tools"] if t["type"] == "function"]
    assert functions and {t["strict"] for t in functions} == {False}
    assert all("function" not in t for t in functions)  # flat: name and parameters on the tool
    assert {"namespace", "web_search"} <= {t["type"] for t in first["tools"]}
    assert first["reasoning"] == {"summary": "auto"}
    assert first["include"] == ["reasoning.encrypted_content"]
    assert first["store"] is False and first["stream"] is True and first["prompt_cache_key"]
    assert not {"temperature", "top_p", "max_output_tokens"} & set(first)
    kinds = [item["type"] for item in second["input"]][len(first["input"]):]
    assert kinds == ["reasoning", "function_call", "function_call_output"], kinds


def test_claude_code_healthy_sends_the_messages_shape(coding_agent, record_property):
    done = run(coding_agent, "claude", "healthy", record_property)
    assert done.answered, done.describe()
    assert [(e["path"], e["status"]) for e in done.generations] == \
        [("/v1/messages?beta=true", 200)] * 2, done.describe()
    headers = done.generations[0]["headers"]
    assert headers["anthropic-version"] == "2023-06-01" and headers["anthropic-beta"]
    assert "x-api-key" not in headers  # the log keeps no credentials
    first, second = sent(done, 0), sent(done, 1)
    assert all(block["type"] == "text" for block in first["system"])
    assert any("cache_control" in block for block in first["system"])
    assert first["max_tokens"] == 32000 and first["thinking"] == {"type": "adaptive"}
    assert first["output_config"]["effort"] and first["metadata"]["user_id"]
    assert not {"temperature", "top_p", "top_k"} & set(first)
    assert all(isinstance(m["content"], list) for m in first["messages"])
    result = second["messages"][-1]["content"][-1]
    assert result["type"] == "tool_result" and "cache_control" in result and "is_error" in result


@pytest.mark.parametrize("client", ("pi", "codex"))
def test_late_system_message_template(coding_agent, record_property, client):
    done = run(coding_agent, client, "late_system", record_property,
               **RUNS[client].get("late_system", {}))
    if client == "pi":  # one developer message, first: the template has nothing to refuse
        assert done.answered, done.describe()
        return
    # Codex's two developer items: refused at its first request, and it gives up.
    refused_at_once(done)


def refused_at_once(done):
    assert not done.answered and done.rc, done.describe()
    first = done.generations[0]
    assert first["status"] == 400, done.describe()
    assert "System message must be at the beginning" in first["error"], done.describe()
    assert all(e["status"] == 400 for e in done.generations), done.describe()


def test_late_system_message_template_claude_code(coding_agent, record_property):
    # With its Agent tool, under a local model name, Claude Code ends its first request with a
    # role system message ("Available agent types ..."): refused at once.
    local = run(coding_agent, "claude", "late_system", record_property, **RUNS["claude"]["late_system"])
    assert sent(local, 0)["messages"][-1]["role"] == "system", local.describe()
    refused_at_once(local)
    # Under a claude-* name it sends none, and the template renders its first request. That
    # request is large (the agent types move into a 27 KB system: ~47,800 of the self-test
    # model's byte-sized tokens), so the run stops once the server has answered its status.
    named = run(coding_agent, "claude", "late_system", record_property, tools="Bash,Agent",
                model="claude-sonnet-4-5", max_generations=0)
    assert "system" not in {m["role"] for m in sent(named, 0)["messages"]}, named.describe()
    first = named.generations[0]
    assert "System message" not in first["error"], named.describe()
    assert first["status"] == 200 or "exceeds the available context size" in first["error"], \
        named.describe()


@pytest.mark.parametrize("client", CLIENTS)
def test_template_raising_on_role_tool(coding_agent, record_property, client):
    done = run(coding_agent, client, "tool_raises", record_property,
               **RUNS[client].get("tool_raises", {}))
    assert not done.answered, done.describe()
    statuses = [e["status"] for e in done.generations]
    assert statuses[0] == 200 and statuses[1] == 400, done.describe()  # turn 2 refused
    assert "Conversation roles must alternate" in done.generations[1]["error"], done.describe()


@pytest.mark.parametrize("client", CLIENTS)
def test_template_dropping_tool_results(coding_agent, record_property, client):
    # The result never reaches the prompt: the model calls its tool again, turn after turn,
    # until the harness stops the client at its third request.
    done = run(coding_agent, client, "tool_dropped", record_property,
               **RUNS[client]["tool_dropped"])
    assert not done.answered and done.stopped, done.describe()
    assert {e["status"] for e in done.generations} == {200}, done.describe()
    made = calls(sent(done, 2))
    assert len(made) == 2 and made[0] == made[1], made  # the same call, twice


def size_kb(done) -> float:
    return round(len(json.dumps(sent(done, 0))) / 1024, 1)


def test_a_missing_tool_skips_outside_ci_and_errors_under_it(monkeypatch):
    from real_clients import FetchError, _run, or_skip

    def fetch():
        _run(["frank-no-such-npm", "install"], "npm install")
    monkeypatch.setenv("CI", "false")
    with pytest.raises(pytest.skip.Exception, match="real clients unavailable: npm install: "
                                                    "frank-no-such-npm not found"):
        or_skip(fetch)
    monkeypatch.setenv("CI", "true")
    with pytest.raises(FetchError, match="frank-no-such-npm not found"):
        or_skip(fetch)


def calls(body):
    """The tool calls (name, arguments) in a request's history, chat or Responses shaped."""
    if "system" in body:  # Anthropic Messages: tool_use blocks
        return [(b["name"], b["input"]) for m in body["messages"] if isinstance(m["content"], list)
                for b in m["content"] if b["type"] == "tool_use"]
    if "messages" in body:
        return [(c["function"]["name"], c["function"]["arguments"])
                for m in body["messages"] for c in m.get("tool_calls") or ()]
    return [(i["name"], i["arguments"]) for i in body["input"] if i["type"] == "function_call"]


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_profiles_agree_with_the_clients(coding_agent, client_server, run_fleet, pytester,
                                         record_property, scenario):
    # The clients claim on the same server: a profile passes exactly where its client answered.
    # Healthy, each profile is sized like its client's recorded first request; under the faults
    # (the template's, whatever the size) small, as the claim's own tests send. The endpoint
    # waits for an answer as Codex does (its stream idle timeout, 300 s): a 37 KB prompt takes
    # the self-test model over the default 30 s on a loaded 2-core machine.
    real = {name: coding_agent(name, scenario, **RUNS[name].get(scenario, {}))
            for name in CLIENTS}
    asked = [{PROFILE[name]: {"request_kb": size_kb(done) if scenario == "healthy" else 2}}
             for name, done in real.items()]
    fleet = one_endpoint(client_server(scenario).url, "llamacpp", timeout=300,
                         expect={"clients": asked})
    run_fleet(fleet, "-p", "no:randomly", "-m", "clients", "--frank-json=run.json")
    rows = json.loads((pytester.path / "run.json").read_text())["rows"]
    verdicts = {row["key"].split("[")[-1].rstrip("]").split("-", 1)[1]: row["verdict"]
                for row in rows}
    found = {name: (verdicts.get(PROFILE[name]), done.answered) for name, done in real.items()}
    record_property("agreement", json.dumps(found))
    print(scenario, found)
    disagree = {name: f"profile {verdict}, client {'answered' if answered else 'did not'}"
                for name, (verdict, answered) in found.items()
                if (verdict == "pass") != answered}
    notes = "\n".join(note for row in rows for note in row["notes"])
    assert not disagree, f"{scenario}: {disagree}\n" + "\n".join(
        real[name].outcome() for name in disagree) + "\n" + notes[-3000:]
