"""vision against emulated engines: a model that really looks at the image (it decodes what it is
sent with Pillow), one that answers a constant, one that names every colour, one that rejects
images (vLLM's text-only 400), and the llama.cpp and Anthropic image forms."""

import pytest
import io

from PIL import Image

from emulator import Emulator, Reply, chat_json, sent_images
from fleets import one_endpoint

pytestmark = pytest.mark.emulated

# The emulated model's own idea of colour names, independent of the check's table.
NAMES = {"red": (255, 0, 0), "green": (0, 128, 0), "blue": (0, 0, 255), "yellow": (255, 255, 0),
         "black": (0, 0, 0), "white": (255, 255, 255), "grey": (128, 128, 128)}


def colour_of(data: bytes) -> str:
    pixel = Image.open(io.BytesIO(data)).convert("RGB").resize((1, 1)).getpixel((0, 0))
    return min(NAMES, key=lambda n: sum((a - b) ** 2 for a, b in zip(NAMES[n], pixel)))


def seeing(req):
    """A working vision model: names the colour of the image it received."""
    images = sent_images(req.body)
    return Reply(200, chat_json(f"The image is {colour_of(images[0])}." if images else "No image."))


def test_vllm_vision_model_that_sees_passes_with_images_attached(run_fleet):
    with Emulator("vllm", models=["vl"]) as em:
        em.route("POST", "/v1/chat/completions", seeing)
        result = run_fleet(one_endpoint(em.url, "vllm", alias="vl", expect={"vision": True}),
                           "-m", "vision", "-v")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["*test_vision*ep-data_url*PASSED*"])
    urls = [p["image_url"]["url"] for r in em.requests if r.path.endswith("/completions")
            for p in r.body["messages"][0]["content"] if p["type"] == "image_url"]
    assert len(urls) == 2 and all(u.startswith("data:image/png;base64,") for u in urls)
    shown = [r.body for r in em.requests if r.path.endswith("/completions")]
    assert colour_of(sent_images(shown[-1])[0]) != colour_of(sent_images(shown[-2])[0])


def test_llamacpp_forms_data_url_and_bare_base64(run_fleet):
    with Emulator("llamacpp", models=["vl"]) as em:
        em.route("GET", "/props", lambda r: Reply(200, {"modalities": {"vision": True}}))
        em.route("POST", "/v1/chat/completions", seeing)
        result = run_fleet(one_endpoint(em.url, alias="vl", expect={"vision": True}), "-m", "vision")
    result.assert_outcomes(passed=2)
    urls = [p["image_url"]["url"] for r in em.requests if r.path.endswith("/completions")
            for p in r.body["messages"][0]["content"] if p["type"] == "image_url"]
    assert sum(u.startswith("data:") for u in urls) == 2
    assert sum(u.startswith("iVBOR") for u in urls) == 2  # bare base64 PNG


def test_anthropic_proxy_gets_base64_image_blocks(run_fleet):
    def messages(req):
        images = sent_images(req.body)
        return Reply(200, {"type": "message", "role": "assistant", "stop_reason": "end_turn",
                           "content": [{"type": "thinking", "thinking": "a flat field"},
                                       {"type": "text", "text": colour_of(images[0]).upper()}]})

    with Emulator("anthropic", models=["vl"]) as em:
        em.route("POST", "/v1/messages", messages)
        result = run_fleet(one_endpoint(em.url, "anthropic", alias="vl", expect={"vision": True}),
                           "-m", "vision", "-v")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["*test_vision*ep-anthropic*PASSED*"])
    sent = [r.body for r in em.requests if r.path == "/v1/messages"]
    block = sent[0]["messages"][0]["content"][1]
    assert block["type"] == "image" and block["source"]["media_type"] == "image/png"
    # the third image comes back from a screenshot tool, inside its tool_result
    result_block = sent[-1]["messages"][-1]["content"][0]
    assert result_block["type"] == "tool_result" and \
        result_block["content"][0]["source"]["media_type"] == "image/png", sent[-1]


def test_constant_answer_fails_as_not_seeing(run_fleet):
    with Emulator("vllm", models=["vl"]) as em:
        em.route("POST", "/v1/chat/completions", lambda r: Reply(200, chat_json("It is red.")))
        result = run_fleet(one_endpoint(em.url, "vllm", alias="vl", expect={"vision": True}),
                           "-m", "vision")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([
        "the model gives the same answer for a * and a * image (data_url): 'It is red.'; it does "
        "not see the image"])


def test_answer_naming_every_colour_fails(run_fleet):
    listing = "red, green, blue, yellow, black or white"
    with Emulator("vllm", models=["vl"]) as em:
        em.route("POST", "/v1/chat/completions",
                 lambda r: Reply(200, chat_json(f"{listing} ({len(em.requests)})")))
        result = run_fleet(one_endpoint(em.url, "vllm", alias="vl", expect={"vision": True}),
                           "-m", "vision")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["shown a solid * image (data_url), the model answered "
                                 "'red, green, blue, yellow, black or white (*)' (names red, "
                                 "green, blue, yellow, black, white)"])


def test_thinking_that_eats_the_budget_is_named(run_fleet):
    with Emulator("vllm", models=["vl"]) as em:
        em.route("POST", "/v1/chat/completions", lambda r: Reply(200, chat_json(
            "", finish="length", reasoning="Let me look at the pixels...",
            tokens=r.body["max_tokens"])))
        result = run_fleet(one_endpoint(em.url, "vllm", alias="vl",
                                        expect={"vision": {"max_tokens": 64}}), "-m", "vision")
    result.assert_outcomes(failed=1)
    # Asked once more with the larger budget, which this endpoint also spends thinking.
    result.stdout.fnmatch_lines(["*thinking did not end within 8192 tokens: finish_reason "
                                 "'length' with * tokens of reasoning and no answer; "
                                 "`expect.vision.max_tokens` (64) ran out first, then this larger "
                                 "budget, bounded by max_thinking_tokens",
                                 "*fix: lower the reasoning effort clients send*"])
