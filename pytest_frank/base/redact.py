"""What an endpoint sends is made inert before it leaves: secrets masked (before any cut, so no
prefix of a key survives), control characters escaped (no ANSI, OSC title or clipboard writes, no
NUL reaches a terminal, JUnit, HTML or Markdown), and every message cut to a bounded length.

A secret is masked in the forms it travels in too, as CI runners mask theirs: base64 (alone, or
inside a longer base64 string at any of the three byte alignments), URL-encoded and JSON-escaped.

The secrets are the run's (pytest_frank.base.state): what one pytest run registered is not masked,
nor named, in another run in the same process.
"""

from __future__ import annotations

import base64
import json
import re
from urllib.parse import quote, quote_plus, urlsplit

from pytest_frank.base import state

MASK = "***"
MAX_MESSAGE = 4000  # one failure, skip or evidence note: a 3 MiB error body is not copied whole
MIN_SECRET = 4  # shorter values would mask ordinary words; a real key is never that short
MIN_FRAGMENT = 8  # the middle of a base64 run: a shorter one would match by chance
# C0 controls but tab and newline, DEL, C1 controls, and the bidi overrides that reorder text.
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")
_ESCAPES = {c: chr(c).encode("unicode_escape").decode("ascii") for c in range(0x2070)
            if _CONTROL.fullmatch(chr(c))}  # each control character: its escape, as shown
_SPACE = re.compile(r"\s")
SQUEEZE_PIECE = 64 * 1024  # characters `squeeze` splits at once
# Names of headers whose values are credentials, masked wherever they appear.
SECRET_HEADER = re.compile(r"auth|key|token|secret|cookie|session|password", re.I)
# Names of variables (and flags) whose values are credentials: ${HF_TOKEN}, --api-key.
CREDENTIAL_NAME = re.compile(r"key|token|secret|pass|auth|credential", re.I)
# What a credential-named setting holds when there is no credential: masking these would turn
# every "none" in a report into *** and hide nothing.
PLACEHOLDERS = frozenset({"empty", "none", "null", "nil", "dummy", "changeme", "unused",
                          "no-key", "sk-no-key-required", "frank-no-key"})


class Secrets:
    """One run's secrets (pytest_frank.base.state): what it masks, and what it names by variable."""

    def __init__(self) -> None:
        self.values: set[str] = set()
        self.forms: set[str] = set()  # their base64, URL-encoded and JSON-escaped copies
        self.pattern: re.Pattern | None = None  # every masked form, longest first; None: rebuild
        self.named: dict[str, str] = {}  # value -> the variable a reproduce line names instead


def _secrets() -> Secrets:
    return state.current().part(Secrets)


def register(secret: str | None) -> None:
    """Mask `secret` and its encoded forms in everything this run sends out from now on."""
    known = _secrets()
    if not secret or len(secret) < MIN_SECRET or secret in known.values:
        return
    known.forms.update(f for f in encoded_forms(secret) if len(f) >= MIN_SECRET)
    known.values.add(secret)
    known.pattern = None


def register_credential(value: str | None) -> None:
    """A value guessed to be a credential by its name (`HF_TOKEN=...`, `--api-key ...`, a
    `${*_KEY}` in fleet.yaml): a secret unless it is a placeholder or a number. A name guess
    also catches counts (`MAX_TOKENS=8192`, `--max-num-batched-tokens`, `PASSES=3`); masking
    8192 would blank every context size in the reports, and no key is a plain number."""
    value = (value or "").strip()
    if value and value.lower() not in PLACEHOLDERS and not _number(value):
        register(value)


def _number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return text.lower() in ("true", "false", "on", "off", "yes", "no")
    return True


def is_credential_name(name: str) -> bool:
    return bool(CREDENTIAL_NAME.search(name))


def encoded_forms(secret: str) -> set[str]:
    """The copies of `secret` a body, a log or a URL may carry instead of the secret itself."""
    raw = secret.encode("utf-8")
    forms = {quote(secret), quote(secret, safe=""), quote_plus(secret),
             json.dumps(secret)[1:-1], json.dumps(secret, ensure_ascii=False)[1:-1],
             json.dumps(secret)[1:-1].replace("/", "\\/")}
    whole = base64.b64encode(raw).decode("ascii")
    forms |= {whole, whole.rstrip("=")}
    for shift in range(3):  # inside a longer base64 string, after 0, 1 or 2 other bytes
        fragment = _base64_core(raw, shift)
        if len(fragment) >= MIN_FRAGMENT:
            forms |= {fragment, fragment.translate(_URLSAFE)}
    forms |= {f.translate(_URLSAFE) for f in (whole, whole.rstrip("="))}
    forms.discard(secret)
    return forms


_URLSAFE = str.maketrans("+/", "-_")


def _base64_core(raw: bytes, shift: int) -> str:
    """The base64 characters that depend on `raw` alone when it starts `shift` bytes into a
    3-byte group: the ones its neighbours' bits leak into are left off at both ends."""
    encoded = base64.b64encode(b"\0" * shift + raw).decode("ascii").rstrip("=")
    start = (0, 2, 3)[shift]
    total = shift + len(raw)
    end = total // 3 * 4 + (0, 1, 2)[total % 3]
    return encoded[start:end]


def register_url(url: str | None) -> None:
    """Credentials in a URL (`http://user:pass@host`) are secrets like an api_key."""
    try:
        parts = urlsplit(url or "")
    except ValueError:
        return
    if parts.password:
        register(parts.password)
        register(f"{parts.username}:{parts.password}")
    elif parts.username:
        register(parts.username)


def register_variable(value: str | None, name: str, replace: bool = True) -> None:
    """A value a curl line shows as `$NAME` (the fleet's own `${VAR}`, else the api key as
    $API_KEY): the line then works wherever the variable is set, and never holds the value.
    Without `replace`, a name the value already has stays."""
    if value and len(value) >= MIN_SECRET:  # a shorter one would be found inside ordinary words
        if replace or value not in _secrets().named:
            _secrets().named[value] = name


def named_parts(text: str) -> list[tuple[str, bool]]:
    """`text` as literal pieces (False) and the variable names of registered values (True)."""
    named = dict(_secrets().named)
    if not named:
        return [(text, False)]
    known = re.compile("|".join(map(re.escape, sorted(named, key=len, reverse=True))))
    parts, at = [], 0
    for match in known.finditer(text):
        parts += [(text[at:match.start()], False), (named[match.group(0)], True)]
        at = match.end()
    parts.append((text[at:], False))
    return [(piece, named) for piece, named in parts if piece]


def _pattern() -> re.Pattern | None:
    known = _secrets()
    pattern = known.pattern
    if pattern is None and known.values:
        forms = sorted(known.values | known.forms, key=len, reverse=True)  # a longer form wins
        pattern = known.pattern = re.compile("|".join(map(re.escape, forms)))
    return pattern


def scrub(text: str) -> str:
    """Every registered secret, in every form, replaced by ***."""
    pattern = _pattern()
    return text if pattern is None else pattern.sub(MASK, text)


def cut(text: str, limit: int, tail: str = "...") -> str:
    """`text` masked, then cut to `limit` characters: a cut never leaves a key's first half."""
    text = scrub(text)
    return text if len(text) <= limit else text[:limit] + tail


def squeeze(text: str, limit: int | None = None) -> str:
    """`" ".join(text.split())`, made a piece at a time: a list of a 4 MiB line's short words
    weighs many times the line. With `limit`, only as far as `limit` + 1 characters need."""
    parts: list[str] = []
    start, made = 0, 0
    while start < len(text) and (limit is None or made <= limit + 1):
        end = min(start + SQUEEZE_PIECE, len(text))
        if end < len(text) and not text[end - 1].isspace():  # a piece ends where a word does
            space = _SPACE.search(text, end)
            end = space.start() if space else len(text)
        piece = " ".join(text[start:end].split())
        if piece:
            parts.append(piece)
            made += len(piece) + 1
        start = end
    return " ".join(parts)


def inert(text: str, limit: int = MAX_MESSAGE) -> str:
    """Secrets masked, control characters shown as escapes, then cut to `limit` characters."""
    # Only the part shown is escaped, the rest counted: escaping all of a 4 MiB line of control
    # characters made an object per character, hundreds of MiB.
    text = scrub(text)
    shown = text[:limit].translate(_ESCAPES)  # an escape only lengthens what it replaces
    if len(text) <= limit and len(shown) <= limit:
        return shown
    rest = text[limit:]
    more = len(shown) - limit + len(rest) + sum(rest.count(chr(c)) * (len(e) - 1)
                                                for c, e in _ESCAPES.items()
                                                if c < 128 or not rest.isascii())
    return shown[:limit] + f"... [{more} more cut]"
