"""Real coding agents (pi, Codex; tests/real_clients.py) against real llama.cpp servers on the
self-test agent model: what each sends, and how each fares healthy, under a template that raises
on a late system message, and under the agent claim's two turn-2 faults."""

import pytest

CLIENTS = ("pi", "codex")


def run(coding_agent, client_server, client, scenario, record_property, **limits):
    done = coding_agent(client, client_server(scenario).url, **limits)
    record_property("outcome", done.outcome())
    print(done.outcome())
    return done


def sent(done, turn):
    return done.generations[turn]["body"]


def test_pi_healthy_sends_its_chat_shape(coding_agent, client_server, record_property):
    done = run(coding_agent, client_server, "pi", "healthy", record_property)
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


def test_codex_healthy_sends_the_responses_shape(coding_agent, client_server, record_property):
    done = run(coding_agent, client_server, "codex", "healthy", record_property)
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


@pytest.mark.parametrize("client", CLIENTS)
def test_late_system_message_template(coding_agent, client_server, record_property, client):
    done = run(coding_agent, client_server, client, "late_system", record_property)
    if client == "pi":  # one developer message, first: the template has nothing to refuse
        assert done.answered, done.describe()
        return
    # Codex's two developer items: refused at its first request, and it gives up.
    assert not done.answered and done.rc, done.describe()
    first = done.generations[0]
    assert first["status"] == 400, done.describe()
    assert "System message must be at the beginning" in first["error"], done.describe()
    assert all(e["status"] == 400 for e in done.generations), done.describe()


@pytest.mark.parametrize("client", CLIENTS)
def test_template_raising_on_role_tool(coding_agent, client_server, record_property, client):
    done = run(coding_agent, client_server, client, "tool_raises", record_property)
    assert not done.answered, done.describe()
    statuses = [e["status"] for e in done.generations]
    assert statuses[0] == 200 and statuses[1] == 400, done.describe()  # turn 2 refused
    assert "Conversation roles must alternate" in done.generations[1]["error"], done.describe()


@pytest.mark.parametrize("client", CLIENTS)
def test_template_dropping_tool_results(coding_agent, client_server, record_property, client):
    # The result never reaches the prompt: the model calls its tool again, turn after turn,
    # until the harness stops the client at its third request.
    done = run(coding_agent, client_server, client, "tool_dropped", record_property,
               max_generations=2)
    assert not done.answered and done.stopped, done.describe()
    assert {e["status"] for e in done.generations} == {200}, done.describe()
    made = calls(sent(done, 2))
    assert len(made) == 2 and made[0] == made[1], made  # the same call, twice


def calls(body):
    """The tool calls (name, arguments) in a request's history, chat or Responses shaped."""
    if "messages" in body:
        return [(c["function"]["name"], c["function"]["arguments"])
                for m in body["messages"] for c in m.get("tool_calls") or ()]
    return [(i["name"], i["arguments"]) for i in body["input"] if i["type"] == "function_call"]
