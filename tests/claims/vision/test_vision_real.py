"""vision against a real llama.cpp (xllamacpp) with a real projector, both sides.

The passing side: `selftest:vision` with the self-test projector (`mmproj: selftest`) names the
colour of a solid image, so the claim passes in every form llama.cpp takes: a data URL and bare
base64 on /v1/chat/completions, and an Anthropic image block on its /v1/messages. The claim draws
two of its six colours at random for each endpoint and form; ten rounds show 60 images. The
embedded default (examples/selftest.yaml, the README's main command) asks vision of it too.

The failing side, each a fault the claim exists to catch:
- a gateway that drops the image (emulated: tests/support/proxy.py, in front of the real server; no
  engine here loses images by itself), and one that serves one cached image for every request
  (the same proxy): the answers no longer follow the image, a model that does not see;
- the text-only self-test model with a projector loaded (tests/support/projector.py's random one, or the
  self-test projector): llama.cpp accepts the image and encodes it (4 image tokens), but the model
  says "Hello!" whatever it shows, and the check must call it a constant answer, not a missing
  projector. (The same model without a projector, and its --mmproj diagnosis:
  tests/engines/test_engine_battery_real.py.)
"""

import copy
import json
import re

import httpx
import pytest

from fleets import one_endpoint
from projector import write_projector
from proxy import Proxy

from checkout import ROOT
from pytest_frank.claims.vision import COLOURS

pytestmark = pytest.mark.real

FORMS = ("data_url", "base64", "anthropic")


@pytest.fixture(scope="module")
def sighted(llama):
    # One thread: on a box shared with other jobs, two threads that wait on each other at every
    # step make a 5-token answer take seconds.
    return llama(model="selftest:vision", mmproj="selftest", threads=1)


def both_shapes(url, name="ep", **extra):
    """The endpoint as llama.cpp (data URL, bare base64) and as an Anthropic proxy (image block)."""
    return {name: {"url": url, "engine": "llamacpp", "alias": "frank", **extra},
            f"{name}-messages": {"url": url, "engine": "anthropic", "alias": "frank", **extra}}


ROUNDS = 10


def test_the_seeing_model_passes_in_every_form(sighted, run_fleet, tmp_path):
    """Ten rounds in one run (ten endpoints of each shape on the one server, probed each on its
    own): each round draws its own two colours per form, and a third on /v1/messages sent
    back by a screenshot tool: 70 images in all."""
    endpoints = {}
    for n in range(ROUNDS):
        endpoints.update(both_shapes(sighted.url, f"r{n}", expect={"vision": True}))
    record = tmp_path / "run.json"
    result = run_fleet({"endpoints": endpoints}, "-m", "vision", f"--frank-json={record}")
    result.assert_outcomes(passed=len(FORMS) * ROUNDS)
    shown = [a["name"] for row in json.loads(record.read_text())["rows"]
             for a in row["attachments"]]
    # two images per form, and on /v1/messages a third inside a screenshot tool's tool_result
    assert len(shown) == (2 * len(FORMS) + 1) * ROUNDS
    assert {name.split("-")[0] for name in shown} == {"data_url", "base64", "anthropic",
                                                      "anthropic_tool_result"}
    assert len({name.split("-")[1] for name in shown}) >= 4  # the draws are random


def drop_images(body: dict) -> dict:
    """A gateway that forwards only the text of each message."""
    body = copy.deepcopy(body)
    for message in body.get("messages", []):
        if isinstance(message.get("content"), list):
            message["content"] = [p for p in message["content"] if p.get("type") == "text"]
    return body


class OneImage:
    """A gateway that caches the first image it sees (per API shape) and sends it in place of
    every later one."""

    def __init__(self) -> None:
        self.first: dict[str, dict] = {}

    def __call__(self, body: dict) -> dict:
        body = copy.deepcopy(body)
        for message in body.get("messages", []):
            parts = message.get("content")
            for n, part in enumerate(parts if isinstance(parts, list) else []):
                if part.get("type") in ("image_url", "image"):
                    parts[n] = self.first.setdefault(part["type"], part)
        return body


@pytest.mark.parametrize("gateway, answer", [
    (drop_images, "'Hello!'"),  # the model answers the text alone
    (OneImage, "'*'"),  # the first colour, for every later image too
], ids=["drops", "one-cached-image"])
def test_a_gateway_that_loses_the_image_fails_as_not_seeing(sighted, run_fleet, gateway, answer):
    rewrite = gateway if gateway is drop_images else gateway()
    with Proxy(sighted.url, rewrite=rewrite) as proxy:
        result = run_fleet({"endpoints": both_shapes(proxy.url, expect={"vision": True})},
                           "-m", "vision")
    result.assert_outcomes(failed=3)
    for form in FORMS:
        result.stdout.fnmatch_lines([
            f"*the model gives the same answer for a * and a * image ({form}): {answer}; "
            "it does not see the image"])
    if gateway is OneImage:  # it saw an image, a stale one: each answer names a colour
        # form -> colour; under CI=true pytest's summary repeats each line whole
        said = dict(re.findall(r"image \((\w+)\): '(\w+)'; it does not see",
                               result.stdout.str()))
        assert len(said) == 3 and set(said.values()) <= set(COLOURS), said


def text_of_tool_results(body: dict) -> dict:
    """A gateway that hands a tool_result on as its text alone, as llama.cpp read one before
    its PR 22536: a tool's image is dropped, the user's images pass."""
    body = copy.deepcopy(body)
    for message in body.get("messages", []):
        for part in message.get("content") if isinstance(message.get("content"), list) else []:
            if part.get("type") == "tool_result" and isinstance(part.get("content"), list):
                part["content"] = [p for p in part["content"] if p.get("type") == "text"]
    return body


def test_a_gateway_that_drops_a_tool_results_image_fails(sighted, run_fleet):
    # No engine here drops it (llama.cpp takes it since PR 22536): a gateway in front does.
    with Proxy(sighted.url, rewrite=text_of_tool_results) as proxy:
        result = run_fleet(one_endpoint(proxy.url, "anthropic", alias="frank",
                                        expect={"vision": True}), "-m", "vision")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([
        "*shown a solid * image inside a tool_result (a screenshot tool's result), the model "
        "answered 'Hello!' (names no colour), where it named the colour of each image sent as "
        "a user's: the image in the tool result never reached the model",
        "*fix: the Messages API carries a tool's images inside its tool_result*"])
    results = [p for b in proxy.sent for m in b["messages"] if isinstance(m["content"], list)
               for p in m["content"] if p.get("type") == "tool_result"]
    assert results and all(r["content"] == [] for r in results), results


@pytest.fixture(scope="module", params=["random", "selftest"])
def text_only_with_projector(llama, tmp_path_factory, request):
    """The text-only model with a projector: tests/support/projector.py's, or the one vision sees
    with."""
    if request.param == "random":
        path = write_projector(tmp_path_factory.mktemp("mmproj") / "mmproj.gguf")
        return llama(model="selftest", mmproj=str(path))
    return llama(model="selftest", mmproj="selftest")


def test_projector_loads_and_props_advertise_vision(text_only_with_projector):
    props = httpx.get(f"{text_only_with_projector.url}/props", timeout=10).json()
    assert props["modalities"]["vision"] is True


def test_accepted_image_with_constant_answer_fails_as_not_seeing(text_only_with_projector,
                                                                 run_fleet):
    fleet = one_endpoint(text_only_with_projector.url, alias="frank", expect={"vision": True})
    result = run_fleet(fleet, "-m", "vision")
    result.assert_outcomes(failed=2)  # data_url and bare base64
    for form in ("data_url", "base64"):
        result.stdout.fnmatch_lines([
            f"the model gives the same answer for a * and a * image ({form}): 'Hello!'; "
            "it does not see the image"])
    assert "no vision projector is loaded" not in result.stdout.str()


def test_the_embedded_default_sees(run_fleet):
    """The README's main command: examples/selftest.yaml launches selftest:vision and asks vision."""
    example = ROOT / "examples" / "selftest.yaml"
    result = run_fleet(example.read_text(), "-m", "vision", "-v")
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(["*test_vision*frank-selftest-data_url*PASSED*",
                                 "*test_vision*frank-selftest-base64*PASSED*",
                                 "frank-selftest *vision ok*"], consecutive=False)
