"""Arguments on the wire against real llama.cpp (xllamacpp, the self-test model): a healthy
server passes test_tools_arguments, and each fault a server's tool parser or a gateway makes
fails with its diagnosis. llama.cpp writes every call as the chat API asks (arguments as JSON
text, "{}" for a tool without parameters, a random id per call, the name whole in the call's
first delta), so the faults, which the field saw from other engines' parsers and from gateways,
go through a gateway (tests/support/proxy.py) that rewrites llama.cpp's answers and streams.

The self-test model names the tool whose name closes first, so it calls `run` whenever `run`
is offered; the asks for `run_in_terminal` go through a gateway that offers llama.cpp that tool
alone (`_terminal_alone`), the client still offered both."""

import json

import pytest

from fleets import one_endpoint
from proxy import Proxy

pytestmark = pytest.mark.real


def run(run_fleet, url, test, *args):
    return run_fleet(one_endpoint(url, "llamacpp", expect={"tools": True}), "-p", "no:randomly",
                     "-m", "tools", "-k", test, *args)


def notes(pytester) -> str:
    data = json.loads((pytester.path / "run.json").read_text())
    return "\n".join(data["rows"][0]["notes"])


def _terminal_alone(body):
    """A gateway that offers llama.cpp only the tool asked for when run_in_terminal leads."""
    tools = body.get("tools") or []
    if tools and tools[0]["function"]["name"] == "run_in_terminal":
        body = {**body, "tools": tools[:1]}
    return body


def _answered(edit):
    """rewrite_answer: each call of a whole answer as `edit(name, arguments decoded, id)` gives
    it back: (name, arguments as sent, id)."""
    def rewrite(request, answer):
        for choice in answer.get("choices") or []:
            for call in choice.get("message", {}).get("tool_calls") or []:
                fn = call["function"]
                fn["name"], fn["arguments"], call["id"] = edit(
                    fn["name"], json.loads(fn["arguments"]), call["id"])
        return answer
    return rewrite


def _restreamed(edit):
    """rewrite_stream: each call's argument fragments joined into its first delta, then that
    delta's call as `edit(name, arguments decoded, id)` gives it back (see _answered)."""
    def rewrite(request, events):
        parsed, first, text = [], {}, {}
        for event in events:
            line = event.decode().strip()
            chunk = json.loads(line[6:]) if line.startswith("data: {") else None
            parsed.append((event, chunk))
            for choice in (chunk or {}).get("choices") or []:
                for call in (choice.get("delta") or {}).get("tool_calls") or []:
                    fn = call.setdefault("function", {})
                    i = call.get("index", 0)
                    text[i] = text.get(i, "") + (fn.pop("arguments", None) or "")
                    first.setdefault(i, call)
        for i, call in first.items():
            fn = call["function"]
            fn["name"], sent, call["id"] = edit(fn["name"], json.loads(text[i] or "{}"),
                                                call.get("id"))
            if sent is not None:
                fn["arguments"] = sent
        return [event if chunk is None else f"data: {json.dumps(chunk)}\n\n".encode()
                for event, chunk in parsed]
    return rewrite


def test_healthy_llama_cpp_passes(llama, run_fleet, pytester):
    result = run(run_fleet, llama().url, "arguments", "--frank-json=run.json")
    result.assert_outcomes(passed=1)
    seen = notes(pytester)
    for line in ("run (no arguments), whole: valid run({})",
                 "run (no arguments), streamed: valid run({})",
                 "run_in_terminal, streamed: valid run({})",
                 "run_in_terminal, streamed: the model called run({}) where run_in_terminal was "
                 "asked"):
        assert line in seen, seen


def test_a_whole_streamed_name_and_its_typed_values_pass(llama, run_fleet, pytester):
    with Proxy(llama().url, rewrite=_terminal_alone) as proxy:
        result = run(run_fleet, proxy.url, "arguments", "--frank-json=run.json")
    result.assert_outcomes(passed=1)
    assert ('run_in_terminal, streamed: valid run_in_terminal({"command":"Paris","args":'
            '["Paris"],"job":"Paris"})') in notes(pytester)


@pytest.mark.parametrize("test, rewrites, said, fix", [
    ("required", {"rewrite_answer": _answered(lambda n, a, i: (n, a, i))},
     'tool_choice "required": 0/1 trial(s) valid (0%, need 100%); arguments not a string: the '
     "get_time call's function.arguments came as a JSON object ({\"timezone\": \"Paris\"}), "
     "where the chat API sends them as a JSON string*",
     "send function.arguments as the JSON text of the arguments"),
    # only the stream re-encoded: the same request whole came back right, so the stream path
    ("streamed", {"rewrite_stream": _restreamed(lambda n, a, i: (n, a, i))},
     'streamed tool_choice "required": 0/1 trial(s) valid (0%, need 100%); arguments not a '
     "string: the get_time call's function.arguments came as a JSON object*; cause: the "
     "stream path*(the same request unstreamed came back right*",
     "llama.cpp's streaming parser"),
], ids=["whole", "streamed"])
def test_arguments_sent_as_an_object_fail(llama, run_fleet, test, rewrites, said, fix):
    with Proxy(llama().url, **rewrites) as proxy:
        result = run(run_fleet, proxy.url, f"test_tools_{test}")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([f"*{said}", f"*fix: {fix}*"])


@pytest.mark.parametrize("rewrites, said", [
    ({"rewrite_answer": _answered(lambda n, a, i: (n, "" if n == "run" else json.dumps(a), i))},
     "tool arguments on the wire, run (no arguments), whole: empty arguments: the run call came "
     "with arguments '' (empty text), not '{}'*"),
    ({"rewrite_answer": _answered(lambda n, a, i: (n, None if n == "run" else json.dumps(a), i))},
     "tool arguments on the wire, run (no arguments), whole: empty arguments: the run call came "
     "with no arguments (null or missing), not '{}'*"),
    ({"rewrite_stream": _restreamed(lambda n, a, i: (n, None, i))},
     "tool arguments on the wire, run (no arguments), streamed: empty arguments: the run call "
     "came with arguments '' (empty text), not '{}'*"),
], ids=["empty text", "null", "streamed without arguments"])
def test_a_call_without_arguments_that_loses_its_braces_fails(llama, run_fleet, rewrites, said):
    with Proxy(llama().url, **rewrites) as proxy:
        result = run(run_fleet, proxy.url, "arguments")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([f"*{said}", "*fix: a call without arguments must carry '{}'*"])


def _typed(edit):
    """The run_in_terminal call's arguments as `edit` gives them back, sent as JSON text."""
    return _restreamed(lambda n, a, i: (n, json.dumps(edit(a) if n == "run_in_terminal" else a),
                                        i))


@pytest.mark.parametrize("rewrite, said, fix", [
    (_restreamed(lambda n, a, i: (n[:3], json.dumps(a), i)),
     "tool arguments on the wire, run_in_terminal, streamed: name cut short: the call is named "
     "'run', the start of the offered 'run_in_terminal', and carries run_in_terminal's arguments "
     "(*): a client runs 'run' instead*",
     "a streamed call's name must arrive whole"),
    (_typed(lambda a: {**a, "job": 2134}),
     "tool arguments on the wire, run_in_terminal, streamed: number for a string: "
     "run_in_terminal.job is the number 2134, where the schema types it a string*",
     "convert each argument by the tool's schema, not by how it looks"),
    # fnmatch reads [...] as a class: ? stands for each bracket
    (_typed(lambda a: {**a, "args": json.dumps(a["args"])}),
     "tool arguments on the wire, run_in_terminal, streamed: array sent as a JSON string: "
     "run_in_terminal.args is the text '?\"Paris\"?', where the schema types it array*",
     "send an array or object argument as itself"),
], ids=["name cut", "number for a string", "array as text"])
def test_a_streamed_call_the_gateway_breaks_fails(llama, run_fleet, rewrite, said, fix):
    with Proxy(llama().url, rewrite=_terminal_alone, rewrite_stream=rewrite) as proxy:
        result = run(run_fleet, proxy.url, "arguments")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([f"*{said}", f"*fix: {fix}*"])


def _twice(request, answer):
    """A gateway that passes each call on twice under one id (parallel calls re-stamped)."""
    for choice in answer.get("choices") or []:
        calls = choice.get("message", {}).get("tool_calls") or []
        calls += [dict(c) for c in calls]
    return answer


def test_calls_that_share_an_id_fail(llama, run_fleet):
    with Proxy(llama().url, rewrite_answer=_twice) as proxy:
        result = run(run_fleet, proxy.url, "test_tools_required")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([
        "*same id: 2 of the 2 calls share the id '*': a client answers each call by its id "
        "(tool_call_id), so the answers cannot tell the calls apart*",
        "*fix: every call needs an id of its own*"])
