"""A served chat template rendered here, as transformers' apply_chat_template renders it (jinja2's
immutable sandbox, its tojson, raise_exception and strftime_now), to learn what the template
shows by design. The template comes from an untrusted endpoint: it is rendered in a child Python
(this file run as a script) under a memory limit and a deadline, so a template that loops for
ever or grows a string without end costs a second, not the run.

    render(template, messages, tools) -> the prompt, or None where it cannot be rendered here
"""

from __future__ import annotations

import json
import subprocess
import sys

DEADLINE_S = 5.0
MEMORY_BYTES = 1 << 30  # the child's address space
MAX_OUT = 1 << 20  # characters of prompt read back


def render(template: str, messages: list[dict], tools: list[dict] | None = None) -> str | None:
    """The prompt, or None where the template cannot be rendered here (an engine's own Jinja
    extension, a raise, no jinja2, past the deadline or the memory limit)."""
    job = json.dumps({"template": template, "messages": messages, "tools": tools})
    try:
        done = subprocess.run([sys.executable, "-I", __file__], input=job, capture_output=True,
                              text=True, timeout=DEADLINE_S)
    except (subprocess.TimeoutExpired, OSError):
        return None
    return done.stdout if done.returncode == 0 else None


def _child() -> None:
    import resource
    import time

    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_BYTES, MEMORY_BYTES))
    from jinja2.ext import loopcontrols
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    job = json.load(sys.stdin)
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=[loopcontrols])
    env.filters["tojson"] = _tojson
    env.globals.update(raise_exception=_raise, strftime_now=time.strftime)
    # Engines hand a template "" for a null content; concatenation would raise on None.
    messages = [{**m, "content": m.get("content") or ""} for m in job["messages"]]
    prompt = env.from_string(job["template"]).render(
        messages=messages, tools=job["tools"], add_generation_prompt=True, bos_token="",
        eos_token="")
    sys.stdout.write(prompt[:MAX_OUT])


def _tojson(value, indent=None, ensure_ascii=False, separators=None, sort_keys=False) -> str:
    return json.dumps(value, indent=indent, ensure_ascii=ensure_ascii, separators=separators,
                      sort_keys=sort_keys)


def _raise(message: str):
    raise ValueError(message)


if __name__ == "__main__":
    _child()
