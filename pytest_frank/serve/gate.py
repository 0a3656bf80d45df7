"""The offline half of the gate: a parsed serve command against what fleet.yaml asks of the
endpoint. Every rule reads the engine's flag table from the driver, never the engine's name."""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import urlsplit

from pytest_frank.base.hosts import is_local
from pytest_frank.serve.command import ServeCommand
from pytest_frank.serve.flags import Parsed, parse

FULL_PRECISION_KV = ("f16", "f32", "bf16", "auto")
LOOPBACK = ("127.0.0.1", "localhost", "::1")
WHO = {"unit": "the unit", "script": "the serve script", "command": "the serve command"}
# What a program's name or path looks like; any other first word is a line of some other file,
# and is not quoted.
_PROGRAM = re.compile(r"[\w.~/+-]{1,200}")


# What the gate reads of the claims' parsed options (pytest_frank.claims.<claim>.Options, a layer
# this one does not import); each claim's module holds its class to its protocol here.
class ServeWants(Protocol):
    @property
    def unit_policy(self) -> bool: ...


class SlotsWant(Protocol):
    @property
    def count(self) -> int | None: ...

    @property
    def ctx_per_slot(self) -> int | None: ...


class VramWants(Protocol):
    def as_dict(self) -> dict[str, Any]: ...


@dataclass(frozen=True)
class Finding:
    where: str                          # "file:line"
    what: str
    fix: str
    severity: str = "fail"              # "fail", or "note" where the files cannot decide it

    def __str__(self) -> str:
        return f"{self.where}: {self.what}\n  fix: {self.fix}"


def findings(command: ServeCommand, endpoint, driver) -> list[Finding]:
    """Everything wrong with how `endpoint` is started, for the claims fleet.yaml asks of it."""
    table = driver.launch.serve_flags
    if table is None:
        return [Finding(str(command.where), f"pytest-frank does not read {driver.label} "
                        "command lines", "drop serve: from this endpoint")]
    p = parse(command, table)
    if not p.launched:
        return [Finding(str(command.where), f"{WHO[command.kind]} starts {_program(command)}, "
                        f"not a {driver.label} ({table.example})", "point serve: at the files "
                        "that start this endpoint, or fix `engine:`")]
    found: list[Finding] = []
    for rule in (_needs, _removed, _alias, _listen, _files, _draft, _kv_build, _slots, _fits):
        found += rule(p, endpoint)
    serve: ServeWants = endpoint.options("serve")
    if serve.unit_policy:
        found += unit_policy(command, table)
    return found


def _program(command: ServeCommand) -> str:
    name = command.program
    return repr(name) if _PROGRAM.fullmatch(name) else "something that is no program name"


def _who(p: Parsed) -> str:
    return WHO[p.command.kind]


def _needs(p: Parsed, endpoint) -> list[Finding]:
    found: dict[str, Finding] = {}  # one finding per flag, however many claims need it
    for claim, needs in p.table.needs.items():
        if not endpoint.asks(claim):
            continue
        for need in needs:
            made = _need(p, claim, need)
            first = found.get(need.role)
            if made is None:
                continue
            if first is None or (first.severity == "note" and made.severity == "fail"):
                found[need.role] = made
            elif first.severity == made.severity:
                found[need.role] = replace(first, what=_also(first.what, claim))
    return list(found.values())


def _need(p: Parsed, claim: str, need) -> Finding | None:
    flag, v = p.table.flags[need.role], p.get(need.role)
    if v is None and not need.required:
        return None
    if v is None and need.default_serves:
        return Finding(str(p.command.where), f"{claim} is asked and {_who(p)} leaves "
                       f"{flag.name} at the default: {need.default_serves}",
                       f"pin it, so a build with another default cannot change it: {need.fix}",
                       "note")
    if v is None or not v.on:
        how = "turns it off" if v is not None else "has no"
        return Finding(str(v.where if v else p.command.where),
                       f"{claim} is asked, but {_who(p)} {how} {flag.name}: {need.why}", need.fix)
    if v.text in need.bad:
        return Finding(str(v.where), f"{claim} is asked, but {flag.name} is {v.text}: "
                       f"{need.why}", need.fix)
    return None


def _also(what: str, claim: str) -> str:
    """'tools is asked, but ...' -> 'tools and agent are asked, but ...'."""
    head, said, rest = what.partition(" is asked")
    if not said:
        head, said, rest = what.partition(" are asked")
    return f"{head} and {claim} are asked{rest}"


def _removed(p: Parsed, endpoint) -> list[Finding]:
    """Spellings the engine dropped: a current build refuses to start on them; a fork or an
    older build may still take them, so a note."""
    found = []
    for values in p.values.values():
        for v in values:
            name = v.flag.text.partition("=")[0]
            if name in p.table.removed:
                found.append(Finding(str(v.flag.where), f"{name} was removed from "
                                     f"{p.table.example} (a current build exits at start: \"the "
                                     "argument has been removed\")",
                                     f"use {p.table.removed[name]}", "note"))
    return found


def _alias(p: Parsed, endpoint) -> list[Finding]:
    if not endpoint.alias or "alias" not in p.table.flags:
        return []
    names, flag = p.items("alias"), p.table.flags["alias"].name
    if endpoint.alias in names:
        return []
    served = ", ".join(names) or f"the model path {p.text('model')!r}"
    return [Finding(str(p.where("alias")), f"fleet.yaml calls the model {endpoint.alias!r}, "
                    f"but {_who(p)} serves it as {served}", f"{flag} {endpoint.alias}"
                    + ("" if not names else f" (or add it: {flag} "
                       f"{(p.table.alias_separator or ' ').join(names + [endpoint.alias])})"))]


def _listen(p: Parsed, endpoint) -> list[Finding]:
    if not endpoint.url or "port" not in p.table.flags:
        return []
    url = urlsplit(endpoint.url)
    want = url.port or (443 if url.scheme == "https" else 80)
    port, host = p.text("port"), p.text("host") or ""
    found = []
    if port is not None and port != str(want):
        found.append(Finding(str(p.where("port")), f"{_who(p)} listens on port {port}, "
                             f"fleet.yaml reaches the endpoint on {want} ({endpoint.url})",
                             f"--port {want}, or correct the url (a proxy in between must "
                             f"forward {want} to {port})"))
    if url.hostname not in LOOPBACK and host in LOOPBACK:
        found.append(Finding(str(p.where("host")), f"{_who(p)} listens on {host} only, but "
                             f"fleet.yaml reaches it at {url.hostname}",
                             "--host 0.0.0.0 (or the address fleet.yaml uses)"))
    return found


def _local(p: Parsed, text: str) -> Path:
    path = Path(text).expanduser()
    workdir = p.command.unit.last("Service", "WorkingDirectory") if p.command.unit else None
    return path if path.is_absolute() or workdir is None else Path(workdir.value) / path


def _files(p: Parsed, endpoint) -> list[Finding]:
    found = []
    for role in p.table.files:
        v = p.get(role)
        if v is None or not v.on or not v.text or "://" in v.text:
            continue
        if role not in p.table.gguf and not v.text.startswith(("/", ".", "~")):
            continue  # a hub id or an inline template, not a path
        flag, path = v.flag.text, _local(p, v.text)
        elsewhere = _elsewhere(path, endpoint)
        if elsewhere:
            found.append(Finding(str(v.where), f"{flag} {v.text}: not checked here (the file "
                                 f"lives on {elsewhere})", "the drift check proves the running "
                                 "server loaded it", "note"))
        elif not path.is_file():
            found.append(Finding(str(v.where), f"{flag} {v.text}: no such file; the server "
                                 "exits at start and Restart=on-failure turns that into a "
                                 "crash loop", "put the file there, or correct the path"))
        elif role in p.table.gguf and _magic(path) != b"GGUF":
            found.append(Finding(str(v.where), f"{flag} {v.text} is not a GGUF file (its first "
                                 "4 bytes are not GGUF)", "point it at the .gguf file (a split "
                                 "model: its first part)"))
    return found


def _elsewhere(path: Path, endpoint) -> str | None:
    """The serving host, where a file absent here is that host's to have: the endpoint runs on
    another machine and the file's folder is not on this one either (a missing file beside its
    folder is a typo wherever the gate runs)."""
    host = endpoint.host
    if host is None or is_local(host) or path.is_file() or path.parent.is_dir():
        return None
    return host


def _magic(path: Path) -> bytes:
    with path.open("rb") as f:
        return f.read(4)


def _header(p: Parsed, role: str):
    """A GGUF header for a role's file, or None where there is none to read."""
    from pytest_frank.gguf.reader import GGUFError, read_header

    text = p.text(role)
    if not text or not p.on(role):
        return None
    path = _local(p, text)
    if not path.is_file() or _magic(path) != b"GGUF":
        return None
    try:
        return read_header(path)
    except GGUFError:
        return None


def _nextn(header) -> tuple[int, int]:
    return (header.get("nextn_predict_layers") or 0), (header.get("block_count") or 0)


def _draft(p: Parsed, endpoint) -> list[Finding]:
    if "draft" not in p.table.flags:
        return []
    draft, model = p.get("draft"), p.text("model")
    if draft is not None and draft.on and draft.text:
        found = _draft_file(p, draft, model)
        return [found] if found else []
    mtp = _spec_types(p) & set(p.table.mtp_spec_values)
    head = _header(p, "model") if mtp else None
    if head is not None and _nextn(head)[0] == 0:
        return [Finding(str(p.where("spec_type")), f"--spec-type {p.text('spec_type')}, but "
                        f"the model file {model} has no MTP head (nextn_predict_layers 0)",
                        "serve the release's -mtp GGUF, or another --spec-type")]
    return []


def _spec_types(p: Parsed) -> set[str]:
    """llama.cpp's --spec-type takes a comma-separated list (common/arg.cpp: string_split on
    ',', appended to params.speculative.types)."""
    return {t.strip() for t in (p.text("spec_type") or "").split(",") if t.strip()}


def _draft_file(p: Parsed, draft, model) -> Finding | None:
    """A draft that loads the served model a second time. The MTP advice only where the header
    shows an MTP head, or cannot be read (a name ending -mtp, or the file not here)."""
    flag = p.table.flags["draft"].name
    itself = draft.text == model
    head = _header(p, "draft")
    nextn, blocks = _nextn(head) if head else (0, 0)
    named_mtp = Path(draft.text).name.lower().removesuffix(".gguf").endswith("-mtp")
    if head is not None and 0 < nextn < blocks:
        why = ("is the served model itself, " if itself else "is ") + (
            f"a whole model carrying an MTP head ({blocks - nextn} layers + {nextn} NextN)")
    elif head is None and (itself or named_mtp):
        why = "is the served model itself" if itself else "is an -mtp model file"
    elif itself:  # the header shows no head: drafting from itself gains nothing
        return Finding(str(draft.where), f"{flag} {draft.text} is the served model itself, with "
                       "no MTP head (nextn_predict_layers 0): it loads a second time (twice the "
                       "VRAM) to draft what the model writes anyway, so nearly every draft is "
                       "accepted and nothing is gained", f"point {flag} at a small draft model "
                       "of the same family (same tokenizer), or drop it and use --spec-type "
                       "ngram-mod (drafts from the text, no model)")
    else:
        return None
    return Finding(str(draft.where), f"{flag} {draft.text} {why}: the model loads a second time "
                   "(twice the VRAM) for a head it already has", f"drop {flag} and use "
                   "--spec-type draft-mtp alone (the -mtp GGUF drafts from its own head)")


def _kv_build(p: Parsed, endpoint) -> list[Finding]:
    build = p.table.quantized_kv_build
    quant = [(r, text) for r in ("cache_k", "cache_v")
             if (text := p.text(r)) and text.lower() not in FULL_PRECISION_KV]
    if not build or not quant:
        return []
    role, kind = quant[0]
    flag = p.table.flags[role].name
    state = _cmake_option(Path(p.command.program), build)
    what = (f"{flag} {kind} is a quantized KV cache: it needs a build with {build}=ON, or CUDA "
            "prefill falls back to a slow path (about 12x slower)")
    fix = (f"build with -D{build}=ON (cmake -DGGML_CUDA=ON -DGGML_CUDA_FA=ON -D{build}=ON), or "
           f"use {flag} f16")
    if state == "ON":
        return []
    if state is None:
        return [Finding(str(p.where(role)), what + f"; no CMakeCache.txt next to "
                        f"{p.command.program} says how it was built", fix, "note")]
    return [Finding(str(p.where(role)), what + f"; {p.command.program}'s build has "
                    f"{build}={state}", fix)]


def _cmake_option(binary: Path, option: str) -> str | None:
    """ON/OFF from the CMakeCache.txt of the build tree the binary sits in (build/bin/x)."""
    for cache in (binary.parent.parent / "CMakeCache.txt", binary.parent / "CMakeCache.txt"):
        if cache.is_file():
            for line in cache.read_text(errors="replace").splitlines():
                if line.startswith(option + ":"):
                    return line.partition("=")[2].strip().upper()
            return "OFF (unset)"
    return None


def _slots(p: Parsed, endpoint) -> list[Finding]:
    if not endpoint.asks("slots"):
        return []
    want: SlotsWant = endpoint.options("slots")
    parallel, ctx = p.number("parallel"), p.number("ctx")
    flag = p.table.flags["parallel"].name if "parallel" in p.table.flags else "parallel"
    found = []
    if want.count and parallel is not None and parallel != want.count:
        found.append(Finding(str(p.where("parallel")), f"expect.slots.count is {want.count}, "
                             f"{_who(p)} asks {flag} {parallel}", f"{flag} {want.count}"))
    per_slot = ctx
    split = bool(ctx and p.table.slots_split_ctx and not p.on("kv_unified")
                 and (parallel or 1) > 1)
    if split and ctx and parallel:
        per_slot = ctx // parallel
    if want.ctx_per_slot and per_slot and per_slot != want.ctx_per_slot:
        ctx_flag = p.table.flags["ctx"].name
        how = f" divided by {flag} {parallel}" if split else ""
        fix = (f"the context is divided among the slots: {ctx_flag} "
               f"{want.ctx_per_slot * (parallel or 1)}, or unify the KV cache" if split else
               f"{ctx_flag} {want.ctx_per_slot} (each slot sees the whole context)")
        found.append(Finding(str(p.where("ctx")), f"expect.slots.ctx_per_slot is "
                             f"{want.ctx_per_slot}, {_who(p)} gives each slot {per_slot} "
                             f"(ctx {ctx}{how})", fix))
    return found


def _fits(p: Parsed, endpoint) -> list[Finding]:
    if not endpoint.asks("vram") or not p.table.gguf:
        return []
    vram: VramWants = endpoint.options("vram")
    opts = vram.as_dict()
    from pytest_frank.gguf.reader import GGUFError
    from pytest_frank.vram.plan import PlanError, make_plan, model_memory

    settings = {"ctx_size": p.number("ctx"), "parallel": p.number("parallel"),
                "kv_unified": p.on("kv_unified") or None, "ubatch_size": p.number("ubatch"),
                "swa_full": p.on("swa_full") or None, "cache_type_k": p.text("cache_k"),
                "cache_type_v": p.text("cache_v"), "draft": p.text("draft"),
                "mmproj": p.text("mmproj"), "draft_max": p.number("draft_max")}
    merged = {**opts, **{k: v for k, v in settings.items() if v is not None}}
    if p.text("spec_type") in p.table.mtp_spec_values:
        merged["mtp"] = True
    where = str(p.where("ctx"))
    model = opts.get("model") or p.text("model")
    elsewhere = model and "://" not in model and _elsewhere(_local(p, model), endpoint)
    if elsewhere:
        return [Finding(where, f"the context fit is not checked here (the model file lives on "
                        f"{elsewhere})", "run the gate on that host, or set expect.vram.model "
                        "to a copy of the file here", "note")]
    try:
        modelled = model_memory(make_plan(merged, model))
    except (PlanError, GGUFError, OSError, ValueError) as exc:
        return [Finding(where, f"the context fit could not be modelled: {exc}",
                        "set expect.vram.model and gpu_mib", "note")]
    verdict = modelled.verdict
    if verdict is None or verdict.ok:
        return []
    best = modelled.max_context
    return [Finding(where, f"ctx {merged['ctx_size']} {verdict.message}",
                    f"lower the context to {best} or less" if best else
                    "the model alone does not fit this GPU: a smaller quant or a bigger card")]


def unit_policy(command: ServeCommand, table) -> list[Finding]:
    """The unit hygiene the seeds keep for a server that must come back on its own."""
    unit = command.unit
    if unit is None:
        return [Finding(str(command.where), "expect.serve.unit_policy is set, but serve: names "
                        "no unit", "add serve.unit (the systemd unit that starts the server)")]
    found = []
    where = f"{unit.path}:{(unit.last('Service', 'ExecStart') or unit.entries[0]).line}"

    def need(section: str, key: str, ok, fix: str, why: str) -> None:
        entry = unit.last(section, key)
        if entry is None or not ok(entry.value):
            at = f"{unit.path}:{entry.line}" if entry else where
            shown = f"{key}={entry.value}" if entry else f"no {key}="
            found.append(Finding(at, f"[{section}] {shown}: {why}", fix))

    need("Service", "Restart", lambda v: v in ("on-failure", "always"), "Restart=on-failure",
         "a crash leaves the endpoint down until someone notices")
    need("Service", "RestartSec", lambda v: bool(v), "RestartSec=10",
         "restarts hammer the GPU without a pause")
    if table.native_binary:
        need("Service", "LimitMEMLOCK", lambda v: v == "infinity", "LimitMEMLOCK=infinity",
             "a native CUDA server cannot lock (pin) its memory under the default limit")
    need("Install", "WantedBy", lambda v: bool(v), "WantedBy=multi-user.target",
         "the unit does not start at boot")
    return found
