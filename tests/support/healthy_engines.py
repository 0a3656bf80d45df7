"""Healthy emulated engines for the generation checks (reasoning, reasoning_effort, tools):
an OpenAI-shape engine with reasoning and tool parsers on, an Anthropic Messages proxy."""

from emulator import Reply, chat_json, messages_json, paced, tool_call
from fleets import one_endpoint

SEEDS_MAP = {"minimal": "low", "low": "low", "medium": "medium", "high": "xhigh", "max": "xhigh"}
ALL = {"reasoning": True, "reasoning_effort": SEEDS_MAP,
       "tools": {"trials": 2, "parallel": True, "auto_must_call": True, "named": True}}
ARGS = {"get_weather": {"city": "Paris", "days": 1}, "get_time": {"timezone": "Europe/Paris"},
        "run": {}, "run_in_terminal": {"command": "make", "args": ["test"], "job": "02134"}}
KEY = "sk-emulated-secret-777"


def healthy_chat(field="reasoning_content"):
    """A healthy OpenAI-shape engine with reasoning and tool parsers on (vLLM, SGLang)."""
    def answer(body):
        off = (body.get("chat_template_kwargs") or {}).get("enable_thinking") is False
        extra = {} if off else {field: "Thinking"}
        choice = body.get("tool_choice")
        if not body.get("tools") or choice == "none":
            # "Hello!" is 5 tokens; a smaller budget cuts it there, as an engine does
            budget = body.get("max_completion_tokens") or body.get("max_tokens") or 5
            if budget < 5:
                return chat_json("Hello!"[:budget], finish="length", tokens=budget, **extra)
            return chat_json("Hello!", **extra)
        # the named tool, else the first offered (as the self-test model calls)
        name = choice["function"]["name"] if isinstance(choice, dict) else \
            body["tools"][0]["function"]["name"]
        calls = [tool_call(name, ARGS[name], "call_1")]
        if body.get("parallel_tool_calls"):
            calls.append(tool_call("get_weather", {"city": "London", "days": 1}, "call_2"))
        return chat_json(None, finish="tool_calls", tool_calls=calls, **extra)
    return answer


def healthy_messages(body):
    """A healthy Anthropic Messages proxy: thinking blocks when the request asks for thinking
    (as the Messages API does), tool_use blocks, stop_reason."""
    thinking = "Thinking" if (body.get("thinking") or {}).get("type") == "enabled" else None
    choice = body.get("tool_choice") or {}
    if not body.get("tools") or choice.get("type") == "none":
        return messages_json("Hello!", thinking=thinking)
    name = choice.get("name", body["tools"][0]["name"])
    uses = [(name, ARGS[name])]
    if "London" in body["messages"][0]["content"]:
        uses.append(("get_weather", {"city": "London", "days": 1}))
    return messages_json("", thinking=thinking, tool_uses=uses, stop="tool_use")


def run(run_fleet, em, engine, *args, **expect):
    fleet = one_endpoint(em.url, engine, alias="model", api_key=KEY, expect=expect)
    result = run_fleet(fleet, "-p", "no:randomly", *args)
    assert KEY not in result.stdout.str()  # the key never reaches output or evidence
    return result


def endless_streams(body):
    """The healthy engine's plain answers, but tokens forever to a request that streams, never
    [DONE]: a server that ignores max_tokens (the hostile tests' and the load claim's)."""
    if not body.get("stream"):
        return healthy_chat("reasoning")(body)
    event = 'data: {"choices": [{"index": 0, "delta": {"content": "x"}}]}\n\n'
    return Reply(200, paced(iter(lambda: event, None), 0.01), {"content-type": "text/event-stream"})
