"""vision: the model sees the image it is sent.

Images are drawn at run time (a solid colour field, two different colours per run, chosen at
random), so the right answer is known here and cannot be guessed or cached; a model that answers
the same for both, or names several colours, fails. Each image form the driver speaks (a `data:`
URL, bare base64, an Anthropic image block) is probed separately. The answer is judged, so a reply
cut while thinking is asked again with a larger budget (chat.think_through).
"""

from __future__ import annotations

import base64
import io
import random
import re
from dataclasses import dataclass, field

from pytest_frank.base import redact
from pytest_frank.claims import Claim, option
from pytest_frank.claims import Options as ClaimOptions
from pytest_frank.claims.advice import advise
from pytest_frank.claims.checks import Check, Context
from pytest_frank.claims.replies import require_thinking_ended, thinking_spent
from pytest_frank.drivers import LlamaCppDriver, VllmDriver
from pytest_frank.drivers.base import Driver
from pytest_frank.drivers.protocols import Facts
from pytest_frank.outcome.observation import Observation
from pytest_frank.outcome.verdict import Phrase, Text, fail
from pytest_frank.runtime.chat import Reply, Request, think_through
from pytest_frank.runtime.target import Target

COLOURS = {"red": (220, 20, 20), "green": (20, 170, 40), "blue": (20, 40, 220),
           "yellow": (250, 220, 20), "black": (0, 0, 0), "white": (255, 255, 255)}
SIDE = 448  # big enough that any projector's resize keeps a clean field
PROMPT = ("What colour fills this image? Answer with one word: "
          + ", ".join(COLOURS) + ".")


@dataclass(frozen=True)
class Options(ClaimOptions):
    forms: tuple[str, ...] | None = option(
        None, minItems=1, uniqueItems=True, items={"enum": ["data_url", "base64", "anthropic"]}, about=(
        "Image forms to probe, from `data_url`, `base64`, `anthropic` (default: the engine's)."))
    max_tokens: int = option(1024, minimum=1, about=(
        "Budget per answer (default 1024: thinking models reason first)."))


CLAIM = Claim("vision", "the model sees the image it is sent", Options, order=100,
              tests=("test_vision",))


@dataclass
class Shown:
    colour: str
    png_b64: str
    reply: Reply
    where: str = ""  # how the image travelled, where not as the form's own user part


# The Messages API's screenshot: an image a tool returns, inside its tool_result, as Claude
# Code's tools send one; the model must see it there too (llama.cpp read only the text of a
# tool_result before its PR 22536).
SCREENSHOT = {"type": "function", "function": {
    "name": "screenshot", "description": "Take a screenshot of the screen.",
    "parameters": {"type": "object", "properties": {}}}}
IN_TOOL_RESULT = "inside a tool_result"


@dataclass(kw_only=True)
class Advert(Observation):
    advertised: bool | None = None  # what the engine says of its own vision, where it says
    url: str | None = None


@dataclass(kw_only=True)
class Seen(Observation):
    form: str
    shown: list[Shown] = field(default_factory=list)
    advert: Advert = field(default_factory=Advert)
    max_tokens: int


def forms(options: Options, driver: Driver) -> list[str]:
    return list(options.forms or driver.wire.image_forms)


def png(colour: str) -> str:
    """A solid colour field as base64 PNG."""
    from PIL import Image

    buf = io.BytesIO()
    # A one-colour palette image: the same pixels as RGB, a few hundred bytes of PNG.
    image = Image.new("P", (SIDE, SIDE), 0)
    image.putpalette(list(COLOURS[colour]))
    image.save(buf, format="PNG", optimize=True)
    return base64.b64encode(buf.getvalue()).decode("ascii")


def advert(target: Target) -> Advert:
    path = target.driver.vision_advert_path
    if not path:
        return Advert()
    ex = target.get(path)
    return Advert(url=ex.url,
                  advertised=target.driver.vision_advertised(ex.json()) if ex.ok else None)


def seen(target: Target, form: str) -> Seen:
    """Two different solid colours, drawn now, in one image form."""
    max_tokens = Options.on(target.endpoint).max_tokens
    told = target.need(advert)  # an advert not read says nothing of the engine's vision
    obs = Seen(form=form, max_tokens=max_tokens,
               advert=told if isinstance(told, Advert) else Advert())
    for colour in random.SystemRandom().sample(sorted(COLOURS), 2):
        b64 = png(colour)
        content = [{"type": "text", "text": PROMPT},
                   target.driver.wire.image_part(b64, "image/png", form)]
        obs.shown.append(Shown(colour, b64, think_through(target, Request(content, max_tokens))))
        if not obs.shown[-1].reply.ok:
            return obs  # one refusal says it all; don't repeat it
    if form == "anthropic":  # a third colour, returned by a tool
        colour = random.SystemRandom().choice(sorted(set(COLOURS) - {s.colour for s in
                                                                     obs.shown}))
        b64 = png(colour)
        image = target.driver.wire.image_part(b64, "image/png", form)
        messages: list[dict] = [
            {"role": "user", "content": f"Take a screenshot. {PROMPT}"},
            {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_frank",
                                               "name": "screenshot", "input": {}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_frank",
                                          "content": [image]}]}]
        reply = think_through(target, Request("", max_tokens, tools=[SCREENSHOT],
                                              tool_choice="auto", messages=messages))
        obs.shown.append(Shown(colour, b64, reply, IN_TOOL_RESULT))
    return obs


def judge(obs: Seen, ctx: Context[Options]) -> None:
    """The model names the colour of each image, and not the same for two colours; then of
    the image a tool returned, where one was (judged once the user's images are seen)."""
    for s in obs.shown:
        ctx.attach(f"{obs.form}{'_tool_result' if s.where else ''}-{s.colour}.png",
                   "image/png", s.png_b64)
    thinking_spent([s.reply for s in obs.shown], ctx)
    shown, form = [s for s in obs.shown if not s.where], obs.form
    _judge_shown(shown, form, obs, ctx)
    _judge_shown([s for s in obs.shown if s.where], form, obs, ctx)


def _judge_shown(shown: list[Shown], form: str, obs: Seen, ctx: Context[Options]) -> None:
    answers = [_answer(s, obs, ctx.driver) for s in shown]
    wrong = [(s, a) for s, a in zip(shown, answers) if _named(a) != [s.colour]]
    if not wrong:
        return
    if len(shown) == 2 and _norm(answers[0]) == _norm(answers[1]):
        fail(f"the model gives the same answer for a {shown[0].colour} and a {shown[1].colour} "
             f"image ({form}): {answers[0]!r}; it does not see the image",
             vision_fix(ctx.driver) + "; check the server log for the projector load")
    s, a = wrong[0]
    named = ", ".join(_named(a)) or "no colour"
    if s.where:  # seen as a user's image, not as a tool's
        fail(f"shown a solid {s.colour} image {s.where} (a screenshot tool's result), the model "
             f"answered {a!r} (names {named}), where it named the colour of each image sent "
             f"as a user's: the image in the tool result never reached the model",
             TOOL_RESULT_FIX)
    fail(f"shown a solid {s.colour} image ({form}), the model answered {a!r} (names {named})",
         "check that the projector file belongs to this model (same family and version)")


TOOL_RESULT_FIX = ("the Messages API carries a tool's images inside its tool_result (Claude "
                   "Code's screenshots and image reads): update the engine (llama.cpp took only "
                   "a tool_result's text before its PR 22536), or make the gateway in front "
                   "translate the tool_result's image blocks, not only its text")


def _answer(s: Shown, obs: Seen, driver: Driver) -> str:
    r, form = s.reply, obs.form
    url = r.url
    if r.status is None and r.problem:
        fail(f"the image request ({form}) to {url} failed: {r.problem}", r.fix)
    if driver.no_projector(r):
        fail(f"{url} answered {r.status}: {r.problem}: no vision projector is loaded"
             f"{_advert(obs.advert)}", vision_fix(driver))
    if not r.ok and s.where:
        fail(f"the image {s.where} ({form}) to {url} answered {r.status}: {r.problem}, where "
             f"the same image as a user's was answered", TOOL_RESULT_FIX)
    if not r.ok:
        fail(f"the image request ({form}) to {url} answered {r.status}: {r.problem}"
             f"{_advert(obs.advert)}")
    require_thinking_ended(r, driver, "expect.vision.max_tokens")
    return r.content


def _advert(advert: Advert) -> str:
    if advert.advertised is None:
        return ""
    return f" ({advert.url} says vision {str(advert.advertised).lower()})"


def _named(text: str) -> list[str]:
    return [c for c in COLOURS if re.search(rf"\b{c}\b", text, re.IGNORECASE)]


def _norm(text: str) -> str:
    return redact.squeeze(re.sub(r"[^\w\s]", "", text.lower()))


VISION = Check("test_vision", "vision", seen, judge, cases=forms,
               per="FORM", when="one per image form")


def vision_fix(driver: Facts) -> Text:
    """How the engine is given eyes."""
    return advise(
        driver, "load the model's vision projector (llama.cpp: --mmproj FILE) or serve a "
                "multimodal checkpoint",
        {LlamaCppDriver: lambda d: Phrase(d.start or "", d.flags["mmproj"]("FILE"),
                                          " (the model's vision projector GGUF)"),
         VllmDriver: "serve the model's multimodal checkpoint (with its vision tower; llama.cpp would "
                     "need --mmproj) and do not set --limit-mm-per-prompt image=0"})
