"""test_params_response_format's unprompted schema against an emulated vLLM serving a model that
follows its prompt (emulated: the tiny self-test models write nothing by prompt, so on a real
engine here the prompted card holds only through the grammar, and a server that drops the
schema fails on the card first, tests/claims/chat/test_params_real.py). The model writes the card when
the
prompt asks for it and says hello otherwise; a server that enforces the schema passes, one that
ignores response_format fails on the schema the prompt does not ask for (llama.cpp PR 21537)."""

import json

import pytest
from emulator import Emulator, chat_json, serve_chat
from fleets import one_endpoint

from pytest_frank.claims.params import JSON_PROMPT

pytestmark = pytest.mark.emulated

CARD = {"colour": "red", "code": "PAR", "place": {"city": "Paris"}}
TICKET = {"frank_ticket": "FR-417", "frank_seat": 23}


def model(enforced: bool):
    def answer(body):
        fmt = (body.get("response_format") or {}).get("json_schema") or {}
        if enforced and fmt.get("name") == "frank_ticket":
            return chat_json(json.dumps(TICKET))
        asked = body["messages"][-1]["content"] == JSON_PROMPT
        return chat_json(json.dumps(CARD) if asked else "Hello!")
    return answer


def run(run_fleet, enforced: bool):
    with Emulator("vllm") as em:
        serve_chat(em, model(enforced))
        return run_fleet(one_endpoint(em.url, "vllm", alias="model", expect={"params": True}),
                         "-k", "test_params_response_format and not variants")


def test_an_enforced_schema_passes(run_fleet):
    run(run_fleet, enforced=True).assert_outcomes(passed=1)


def test_a_schema_the_model_answers_by_prompt_alone_fails_unprompted(run_fleet):
    result = run(run_fleet, enforced=False)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([
        "*response_format json_schema that the prompt does not ask for was sent and the content "
        "is not JSON ('Hello!'): the schema is not enforced: the model answered the prompt*",
        "*fix: pass a structured-output backend*"])
