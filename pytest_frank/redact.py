"""What an endpoint sends is made inert before it leaves: secrets masked (before any cut, so no
prefix of a key survives), control characters escaped (no ANSI, OSC title or clipboard writes, no
NUL reaches a terminal, JUnit, HTML or Markdown), and every message cut to a bounded length."""

from __future__ import annotations

import re
from urllib.parse import urlsplit

_SECRETS: set[str] = set()
_NAMED: dict[str, str] = {}  # value -> the environment variable a reproduce line names instead
MASK = "***"
MAX_MESSAGE = 4000  # one failure, skip or evidence note: a 3 MiB error body is not copied whole
# C0 controls but tab and newline, DEL, C1 controls, and the bidi overrides that reorder text.
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")
# Names of headers whose values are credentials, masked wherever they appear.
SECRET_HEADER = re.compile(r"auth|key|token|secret|cookie|session|password", re.I)


def register(secret: str | None) -> None:
    # Very short values would mask ordinary words; a real key is never that short.
    if secret and len(secret) >= 4:
        _SECRETS.add(secret)


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


def register_variable(value: str | None, name: str) -> None:
    """A value a curl line shows as `$NAME` (the api key as $API_KEY, a header's `${VAR}` as
    $VAR): the line then works wherever the variable is set, and never holds the value."""
    if value and len(value) >= 4:  # a shorter one would be found inside ordinary words
        _NAMED[value] = name


def named_parts(text: str) -> list[tuple[str, bool]]:
    """`text` as literal pieces (False) and the variable names of registered values (True)."""
    if not _NAMED:
        return [(text, False)]
    known = re.compile("|".join(map(re.escape, sorted(_NAMED, key=len, reverse=True))))
    parts, at = [], 0
    for match in known.finditer(text):
        parts += [(text[at:match.start()], False), (_NAMED[match.group(0)], True)]
        at = match.end()
    parts.append((text[at:], False))
    return [(piece, named) for piece, named in parts if piece]


def scrub(text: str) -> str:
    for secret in sorted(_SECRETS, key=len, reverse=True):
        text = text.replace(secret, MASK)
    return text


def inert(text: str, limit: int = MAX_MESSAGE) -> str:
    """Secrets masked, control characters shown as escapes, then cut to `limit` characters."""
    text = _CONTROL.sub(lambda m: m.group(0).encode("unicode_escape").decode("ascii"), scrub(text))
    return text if len(text) <= limit else text[:limit] + f"... [{len(text) - limit} more cut]"
