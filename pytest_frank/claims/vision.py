"""vision: the model sees the image it is sent.

Images are drawn at run time (a solid colour field, two different colours per run, chosen at
random), so the right answer is known here and cannot be guessed or cached; a model that answers
the same for both, or names several colours, fails. Each image form the driver speaks (a `data:`
URL, bare base64, an Anthropic image block) is probed separately.
"""

from __future__ import annotations

import base64
import io
import random
import re
from dataclasses import dataclass, field

from pytest_frank import generate
from pytest_frank.http import Exchange
from pytest_frank.verdict import fail

COLOURS = {"red": (220, 20, 20), "green": (20, 170, 40), "blue": (20, 40, 220),
           "yellow": (250, 220, 20), "black": (0, 0, 0), "white": (255, 255, 255)}
SIDE = 448  # big enough that any projector's resize keeps a clean field
MAX_TOKENS = 1024  # thinking models reason before answering; the budget must cover it
PROMPT = ("What colour fills this image? Answer with one word: "
          + ", ".join(COLOURS) + ".")


@dataclass
class Shown:
    colour: str
    png_b64: str
    exchange: Exchange


@dataclass
class Observation:
    advertised: bool | None = None
    advert_url: str | None = None
    forms: dict[str, list[Shown]] = field(default_factory=dict)
    max_tokens: int = MAX_TOKENS
    exchanges: list[Exchange] = field(default_factory=list)  # shared: the advert read

    def evidence(self, form: str) -> list[Exchange]:
        return [s.exchange for s in self.forms.get(form, [])]


def forms(driver, options: dict) -> list[str]:
    return list(options.get("forms") or driver.image_forms)


def png(colour: str) -> str:
    """A solid colour field as base64 PNG."""
    from PIL import Image

    buf = io.BytesIO()
    # A one-colour palette image: the same pixels as RGB, a few hundred bytes of PNG.
    image = Image.new("P", (SIDE, SIDE), 0)
    image.putpalette(list(COLOURS[colour]))
    image.save(buf, format="PNG", optimize=True)
    return base64.b64encode(buf.getvalue()).decode("ascii")


def probe(target) -> Observation:
    options = target.endpoint.options("vision")
    obs = Observation(max_tokens=int(options.get("max_tokens", MAX_TOKENS)))
    _read_advert(target, obs)
    pick = random.SystemRandom()
    for form in forms(target.driver, options):
        shown = obs.forms[form] = []
        for colour in pick.sample(sorted(COLOURS), 2):
            shown.append(_show(target, form, colour, obs.max_tokens))
            if not shown[-1].exchange.ok:
                break  # one refusal says it all; don't repeat it
    return obs


def _read_advert(target, obs: Observation) -> None:
    path = target.driver.vision_advert_path
    if not path:
        return
    ex = target.get(path)
    obs.exchanges.append(ex)
    obs.advert_url = ex.url
    if ex.ok:
        obs.advertised = target.driver.vision_advertised(ex.json())


def _show(target, form: str, colour: str, max_tokens: int) -> Shown:
    b64 = png(colour)
    content = [{"type": "text", "text": PROMPT},
               target.driver.image_part(b64, "image/png", form)]
    return Shown(colour, b64, generate.request(target, content, max_tokens))


def judge(obs: Observation, form: str, driver) -> None:
    shown = obs.forms[form]
    answers = [_answer(s, obs, form, driver) for s in shown]
    wrong = [(s, a) for s, a in zip(shown, answers) if _named(a) != [s.colour]]
    if not wrong:
        return
    if len(shown) == 2 and _norm(answers[0]) == _norm(answers[1]):
        fail(f"the model gives the same answer for a {shown[0].colour} and a {shown[1].colour} "
             f"image ({form}): {answers[0]!r}; it does not see the image",
             driver.vision_fix + "; check the server log for the projector load")
    s, a = wrong[0]
    named = ", ".join(_named(a)) or "no colour"
    fail(f"shown a solid {s.colour} image ({form}), the model answered {a!r} (names {named})",
         "check that the projector file belongs to this model (same family and version)")


def _answer(s: Shown, obs: Observation, form: str, driver) -> str:
    ex = s.exchange
    if ex.error:
        fail(f"the image request ({form}) to {ex.url} failed: {ex.error}")
    if driver.no_projector(ex):
        fail(f"{ex.url} answered {ex.status}: {driver.error_message(ex) or ex.snippet(200)}: "
             f"no vision projector is loaded{_advert(obs)}", driver.vision_fix)
    if not ex.ok:
        fail(f"the image request ({form}) to {ex.url} answered {ex.status}: "
             f"{driver.error_message(ex) or ex.snippet(200)}{_advert(obs)}")
    text, finish = driver.reply_text(ex.json())
    if not (text or "").strip() and finish in ("length", "max_tokens"):
        fail(f"the answer to the {s.colour} image ({form}) is empty with finish {finish!r}: "
             f"thinking used all {obs.max_tokens} max_tokens",
             "raise expect.vision.max_tokens in fleet.yaml")
    return text or ""


def _advert(obs: Observation) -> str:
    if obs.advertised is None:
        return ""
    return f" ({obs.advert_url} says vision {str(obs.advertised).lower()})"


def _named(text: str) -> list[str]:
    return [c for c in COLOURS if re.search(rf"\b{c}\b", text, re.IGNORECASE)]


def _norm(text: str) -> str:
    return " ".join(re.sub(r"[^\w\s]", "", text.lower()).split())
