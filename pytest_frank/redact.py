"""Secrets never reach output: every value registered here is masked wherever text leaves."""

from __future__ import annotations

_SECRETS: set[str] = set()
MASK = "***"


def register(secret: str | None) -> None:
    # Very short values would mask ordinary words; a real key is never that short.
    if secret and len(secret) >= 4:
        _SECRETS.add(secret)


def scrub(text: str) -> str:
    for secret in sorted(_SECRETS, key=len, reverse=True):
        text = text.replace(secret, MASK)
    return text
