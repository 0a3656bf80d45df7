"""A fleet file from surveys: one entry per server (per model with --all-models), every key
followed by a YAML comment that says where its value came from."""

from __future__ import annotations

import re
import time

import yaml

from pytest_frank.init.survey import Survey, inert

HEAD = """\
# Written by `frank init` on {date} from what the servers said of themselves.
# Each claim's comment gives its evidence; edit the values to what the fleet should be, then
#   pytest --endpoints {name}
"""


def flow(value) -> str:
    """A value on one line, as YAML writes it: true, 4096, {count: 1, ctx_per_slot: 4096}."""
    text = yaml.safe_dump(value, default_flow_style=True, width=10**6, sort_keys=False)
    return text.removesuffix("...\n").strip()


def entry_name(model: str, taken: set[str]) -> str:
    """An endpoint name (test ids allow letters, digits and . _ : -) from a served model id."""
    base = re.sub(r"[^A-Za-z0-9._:-]+", "-", model).strip("._:-") or "endpoint"
    name, n = base, 2
    while name in taken:
        name, n = f"{base}-{n}", n + 1
    taken.add(name)
    return name


def render(surveys: list[tuple[Survey, dict | None]], *, key_env: str | None, all_models: bool,
           out_name: str) -> str:
    from pytest_frank.claims import CLAIMS

    lines = [HEAD.format(date=time.strftime("%Y-%m-%d"), name=out_name), "endpoints:"]
    taken: set[str] = set()
    order = {claim: i for i, claim in enumerate(CLAIMS)}
    for found, serve in surveys:
        models = found.models if all_models else found.models[:1]
        for model in models:
            lines.append(f"  {entry_name(model, taken)}:")
            lines.append(f"    url: {flow(found.url)}")
            lines.append(f"    engine: {found.engine}  # {inert(found.engine_why)}")
            others = [m for m in found.models if m not in models]
            note = f"; also served: {', '.join(others)}" if others else ""
            lines.append(f"    alias: {flow(model)}  # served by /v1/models{inert(note)}")
            if key_env:
                lines.append(f"    api_key: ${{{key_env}}}  # read from the environment, "
                             "never written here")
            if serve:
                lines.append(f"    serve: {flow(serve['files'])}  # {inert(serve['why'])}")
            if found.claims:
                lines.append("    expect:")
            for claim in sorted({*found.claims, *found.notes},
                                key=lambda c: order.get(c, len(order))):
                said = found.claims.get(claim)
                if said is not None:
                    lines.append(f"      {claim}: {flow(said.value)}  # {inert(said.why)}")
                if claim in found.notes:  # what was not written, or what the value leaves out
                    # a note's later lines (a fix, say) each a comment line of their own
                    first, *more = found.notes[claim].split("\n")
                    lines.append(f"      # {claim}: {inert(first)}")
                    # a judge's line quotes the answer: room for it whole
                    lines.extend(f"      #   {inert(part, 600)}" for part in more)
    return "\n".join(lines) + "\n"
