"""fleet.yaml: load, expand ${VAR}, merge defaults, validate against the shipped JSON Schema.
The claims are not known here: whoever loads the fleet hands the loader the claims' declarations
(pytest_frank.claims.declared()), and the loader parses each claim's `expect:` value through its
declared `Options` into the entry's `ClaimOptions`, with the claims it asks: the options flow one
way, from the file into the entry, and nothing writes them back."""

from __future__ import annotations

import copy
import json
import os
import re
from dataclasses import dataclass, field, replace
from functools import lru_cache, partial
from importlib import resources
from pathlib import Path
from typing import Any, Mapping, Protocol, TypeVar

from pytest_frank.base import redact, state
from pytest_frank.base.hosts import host_of, server_of
from pytest_frank.fleet import schema_errors

T = TypeVar("T")
DEFAULT_READY_TIMEOUT = 120.0
# Per request (the wait for an answer's first byte, a stream's next token), unless --frank-timeout
# or the endpoint's `timeout:` says otherwise; `frank init` asks with it too.
DEFAULT_TIMEOUT = 30.0
# The larger budget a check that judges the answer asks with, once, when thinking used the first
# one up: R1-style distills, QwQ and gpt-oss at high effort think 500 to 2,000 tokens.
DEFAULT_MAX_THINKING_TOKENS = 8192
MAX_FILE = 1024 * 1024  # bytes of fleet.yaml
MAX_VALUES = 100_000  # scalars, lists and mappings once aliases are expanded
# Generation probes are greedy and seeded unless fleet.yaml says otherwise: two answers then
# differ only when the endpoint does, never because the server sampled twice.
DEFAULT_SAMPLING = {"temperature": 0.0, "seed": 1234}
_VAR = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")


class FleetError(Exception):
    """A fleet file that cannot be used; the message names file, key path and reason."""


class OptionError(ValueError):
    """A claim's `expect:` value that cannot be used, raised while a claim parses it; `key` is
    the dotted path under `expect` ("reasoning_effort.from"), the message the reason."""

    def __init__(self, key: str, reason: str):
        super().__init__(reason)
        self.key = key

    def under(self, claim: str) -> OptionError:
        """The same error, its key prefixed with the claim's name."""
        return OptionError(f"{claim}.{self.key}" if self.key else claim, str(self))


class ParsesOptions(Protocol):
    """A claim's options class as the loader uses it (pytest_frank.claims.Options)."""

    def from_fleet(self, value: Any, endpoint: Endpoint | None = None) -> object: ...


class Declared(Protocol):
    """What the loader reads of one claim's declaration (pytest_frank.claims.Claim is one): how
    its options parse, and how an entry asks it besides its own `expect:` key."""

    @property
    def options(self) -> ParsesOptions: ...

    @property
    def always(self) -> bool: ...

    @property
    def asked_by(self) -> str | None: ...


@dataclass(frozen=True)
class ClaimOptions:
    """An entry's claims as the fleet loaded: each claim's parsed options, by claim name, and the
    claims the entry asks."""

    parsed: Mapping[str, object]
    asked: frozenset[str]


@dataclass
class Endpoint:
    name: str
    engine: str
    url: str | None = None
    api: str | None = None  # the route generation uses: chat, messages, responses; None: engine's
    alias: str | None = None
    api_key: str | None = field(default=None, repr=False)
    ready_timeout: float = DEFAULT_READY_TIMEOUT
    timeout: float | None = None
    headers: dict[str, str] = field(default_factory=dict, repr=False)
    description: str = ""
    same_as: str | None = None  # the endpoint this one is a replica of (the fingerprint claim)
    launch: dict[str, Any] | None = None
    expect: dict[str, Any] = field(default_factory=dict)
    concurrency: int = 1  # requests in flight at once on this endpoint
    min_tokens_per_s: float | None = None  # the slowest decode waited for; None: the default
    deadline: float | None = None  # seconds for all of this endpoint's probes; None: derived
    max_thinking_tokens: int = DEFAULT_MAX_THINKING_TOKENS
    sampling: dict[str, Any] = field(default_factory=lambda: dict(DEFAULT_SAMPLING))
    serve: dict[str, str] | None = None  # how it is started: unit/env/script paths, or command
    regression: dict[str, float] | None = None  # --frank-baseline tolerances
    folder: Path | None = None  # the fleet file's: relative paths in claims' options start here
    # each claim's options and the claims asked (`with_claims`); None: read without its claims
    claims: ClaimOptions | None = field(default=None, repr=False, compare=False)

    @property
    def root(self) -> str:
        """The server root: fleet.yaml may give the URL with or without /v1."""
        url = (self.url or "").rstrip("/")
        return url[: -len("/v1")] if url.endswith("/v1") else url

    @property
    def host(self) -> str | None:
        """The machine that serves it, where its serve files' paths point: serve.host, else the
        URL's host (None for a server this run launches)."""
        if self.serve and self.serve.get("host"):
            return self.serve["host"]
        return host_of(self.url) or None if not self.launch else None

    @property
    def server(self) -> str:
        """The server it reaches, "host:port" ("" for a server this run launches: its own):
        entries that are routes or replicas of one server share it, its slots and counters."""
        return "" if self.launch else server_of(self.url)

    @property
    def api_base(self) -> str:
        return self.root + "/v1"

    @property
    def greedy(self) -> bool:
        """Whether two answers to one request must be the same (temperature 0)."""
        return self.sampling.get("temperature") == 0

    def asks(self, claim: str) -> bool:
        """Whether fleet.yaml asks this claim of the endpoint."""
        return claim in self._read("asks").asked

    def options(self, claim: str) -> Any:
        """The claim's typed options (its `Options`, parsed from `expect.<claim>`)."""
        return self._read("options").parsed[claim]

    def options_of(self, kind: type[T]) -> T:
        """The options of the one claim whose options are a `kind` (a claim's Options class)."""
        found = [opts for opts in self._read("options").parsed.values() if type(opts) is kind]
        if len(found) != 1:
            raise LookupError(f"endpoint {self.name}: {len(found)} claims have options of class "
                              f"{kind.__qualname__}, not one: give the claim an Options class of "
                              f"its own, or read them by its name (options(claim))")
        return found[0]

    def _read(self, what: str) -> ClaimOptions:
        if self.claims is None:
            raise LookupError(f"endpoint {self.name}: its claims were never read, so it has no "
                              f"{what}: load the fleet with claims=pytest_frank.claims.declared()")
        return self.claims


def with_claims(entry: Endpoint, claims: Mapping[str, Declared]) -> Endpoint:
    """The entry with each claim's options parsed from its `expect:` value through the claim's
    declared `Options`, and the claims it asks; raises OptionError, its key under the claim's."""
    parsed = {}
    for name, claim in claims.items():
        try:
            parsed[name] = claim.options.from_fleet(entry.expect.get(name), entry)
        except OptionError as exc:
            raise exc.under(name) from None
    asked = frozenset(name for name, claim in claims.items() if asks(name, claim, entry))
    return replace(entry, claims=ClaimOptions(parsed, asked))


def asks(name: str, claim: Declared | None, entry: Endpoint) -> bool:
    """Whether the entry asks the claim: not where `expect:` turns it off; else by an endpoint
    key of its own where it has one, always where it is always asked, else by its `expect:` key."""
    value = entry.expect.get(name)
    if value is False:
        return False
    if claim is not None and claim.asked_by:
        return bool(getattr(entry, claim.asked_by))
    return (claim is not None and claim.always) or value is not None


class ExpectSchemas(dict[str, dict[str, Any]]):
    """The `expect:` schema fragments of the claims a run registered (pytest_frank.claims
    .register), by name, validated with the built-in ones: part of the run's state."""


def expect_schemas() -> ExpectSchemas:
    return state.current().part(ExpectSchemas)


def load(path: str | os.PathLike, environ: Mapping[str, str] | None = None,
         claims: Mapping[str, Declared] | None = None,
         offline: bool = False) -> dict[str, Endpoint]:
    """The fleet file's endpoints by name; with `claims` (the claims' declarations, by name),
    each with its claims' options parsed and the claims it asks (`with_claims`). `offline`:
    for a run that sends nothing (--frank-offline), a credential's unset ${VAR} (an api_key, a
    header) stays as written: a pull request from a fork gets no secrets, and needs none."""
    path = Path(path)
    environ = os.environ if environ is None else environ
    where = str(path)
    data = _read_yaml(path)
    from_env: set[str] = set()  # values ${VAR} brought in: a usage error never echoes them
    data = _expand(data, environ, where, (), from_env, offline)
    _register_credentials(data)
    _validate(data, where, from_env)
    defaults = data.get("defaults") or {}
    fleet = {}
    for name, raw in data["endpoints"].items():
        merged = _merge(defaults, raw or {})
        entry = _endpoint(name, merged, where, path.parent)
        try:
            fleet[name] = entry if claims is None else with_claims(entry, claims)
        except OptionError as exc:
            raise FleetError(f"{where}: endpoints.{name}.expect.{exc.key}: {exc}") from None
    return fleet


def _read_yaml(path: Path) -> Any:
    import yaml

    try:
        if path.stat().st_size > MAX_FILE:
            raise FleetError(f"{path}: {path.stat().st_size} bytes; a fleet file is at most "
                             f"{MAX_FILE // 1024} KiB")
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise FleetError(f"{path}: no such file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise FleetError(f"{path}: cannot be read ({exc})") from None
    try:
        node = yaml.compose(text, Loader=yaml.SafeLoader)
        _bounded(node, path)
        data = yaml.SafeLoader(text).construct_document(node) if node is not None else None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        at = f" line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise FleetError(f"{path}:{at}: not valid YAML: {problem}") from None
    if data is None:
        raise FleetError(f"{path}: the file is empty; it needs an `endpoints:` mapping")
    if not isinstance(data, dict):
        kind = type(data).__name__
        raise FleetError(f"{path}: the top level must be a mapping with `endpoints:`, not a {kind}")
    return data


def _bounded(node, path: Path) -> None:
    """Refuse a document whose aliases expand past MAX_VALUES values (a few hundred bytes of
    nested anchors can stand for billions), before anything walks the expansion."""
    import yaml

    seen, stack = 0, [node] if node is not None else []
    while stack:
        seen += 1
        if seen > MAX_VALUES:
            raise FleetError(f"{path}: its anchors and aliases expand past {MAX_VALUES} values; "
                             "a fleet file needs far fewer (write the values out)")
        current = stack.pop()
        if isinstance(current, yaml.SequenceNode):
            stack.extend(current.value)
        elif isinstance(current, yaml.MappingNode):
            stack.extend(v for pair in current.value for v in pair)


def _expand(value: Any, environ, where: str, keys: tuple, from_env: set[str],
            offline: bool = False) -> Any:
    if isinstance(value, dict):
        return {k: _expand(v, environ, where, keys + (k,), from_env, offline)
                for k, v in value.items()}
    if isinstance(value, list):
        return [_expand(v, environ, where, keys + (i,), from_env, offline)
                for i, v in enumerate(value)]
    if not isinstance(value, str):
        return value

    def substitute(match: re.Match) -> str:
        var, fallback = match.group(1), match.group(2)
        if var in environ:
            from_env.add(environ[var])
            if redact.is_credential_name(var):  # ${HF_TOKEN} is masked wherever it is put
                redact.register_credential(environ[var])
            if keys[-2:-1] == ("headers",) or keys[-1:] == ("api_key",):
                redact.register_variable(environ[var], var)  # a curl line names it as fleet.yaml
            return environ[var]
        if fallback is not None:
            return fallback
        if offline and (keys[-1:] == ("api_key",) or keys[-2:-1] == ("headers",)):
            return match.group(0)  # only a request would carry it, and none is sent
        raise FleetError(f"{where}: {schema_errors.dotted(keys) or '(top level)'}: environment "
                         f"variable {var} is not set")

    return _VAR.sub(substitute, value)


def _register_credentials(data: dict) -> None:
    """A value used as a credential anywhere in the fleet (an api_key, a secret header, a URL's
    password) is a secret in every output, wherever else it appears: registered before anything,
    a schema error included, can quote it."""
    endpoints = data.get("endpoints")
    for raw in [data.get("defaults"), *(endpoints.values() if isinstance(endpoints, dict) else ())]:
        if not isinstance(raw, dict):
            continue
        if isinstance(raw.get("api_key"), str):
            redact.register(raw["api_key"])
        if isinstance(raw.get("url"), str):
            redact.register_url(raw["url"])
        headers = raw.get("headers")
        for header, value in (headers.items() if isinstance(headers, dict) else ()):
            if isinstance(value, str) and redact.SECRET_HEADER.search(str(header)):
                redact.register(value)


def _merge(base: dict, over: dict) -> dict:
    merged = dict(base)
    for key, value in over.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = _merge(merged[key], value)
        else:
            merged[key] = value
    return merged


def _endpoint(name: str, raw: dict, where: str, base_dir: Path) -> Endpoint:
    at = f"{where}: endpoints.{name}"
    if not raw.get("url") and not raw.get("launch"):
        raise FleetError(f"{at}: needs a `url` (or a `launch:` block to start a local server)")
    engine = raw.get("engine") or ("llamacpp" if raw.get("launch") else None)
    if engine is None:
        raise FleetError(f"{at}: missing required key `engine` (one of {', '.join(ENGINES)})")
    launch = dict(raw["launch"]) if raw.get("launch") else None
    if launch:
        _resolve_paths(launch, base_dir)
    expect = dict(raw.get("expect") or {})
    serve = _serve(raw.get("serve"), at, base_dir)
    # the curl lines say $API_KEY for a key fleet.yaml writes out, its own ${VAR} for one it
    # takes from the environment
    redact.register_variable(raw.get("api_key"), "API_KEY", replace=False)
    return Endpoint(
        name=name,
        engine=engine,
        url=raw.get("url"),
        api=raw.get("api"),
        alias=raw.get("alias"),
        api_key=raw.get("api_key") or None,
        ready_timeout=float(raw.get("ready_timeout", DEFAULT_READY_TIMEOUT)),
        timeout=raw.get("timeout"),
        headers=dict(raw.get("headers") or {}),
        description=raw.get("description", ""),
        same_as=raw.get("same_as"),
        launch=launch,
        expect=expect,
        concurrency=int(raw.get("concurrency", 1)),
        min_tokens_per_s=raw.get("min_tokens_per_s"),
        deadline=raw.get("deadline"),
        max_thinking_tokens=int(raw.get("max_thinking_tokens", DEFAULT_MAX_THINKING_TOKENS)),
        sampling={**DEFAULT_SAMPLING, **(raw.get("sampling") or {})},
        serve=serve,
        regression=raw.get("regression"),
        folder=base_dir,
    )


def _serve(raw: dict | None, at: str, base_dir: Path) -> dict[str, str] | None:
    """serve: files are relative to the fleet file and must exist; `command` stays as written."""
    if not raw:
        return None
    serve = dict(raw)
    for key in ("unit", "env", "script"):
        if serve.get(key):
            path = Path(serve[key]).expanduser()
            path = path if path.is_absolute() else base_dir / path
            if not path.is_file():
                raise FleetError(f"{at}.serve.{key}: {path}: no such file")
            serve[key] = str(path)
    return serve


def _resolve_paths(launch: dict, base_dir: Path) -> None:
    """Relative file paths in `launch:` are relative to the fleet file, not the cwd."""
    for key in ("model", "draft_model", "mmproj", "chat_template_file"):
        value = launch.get(key)
        if value and not value.startswith("selftest") and not Path(value).is_absolute():
            launch[key] = str(base_dir / value)


@lru_cache(maxsize=1)
def schema() -> dict:
    return json.loads(resources.files(__name__).joinpath("fleet.schema.json").read_text())


# The engines fleet.yaml may name: the schema's list, which docs/gen.py writes from the driver
# registry (pytest_frank.drivers.DRIVERS, a layer above this one); tests/package/test_contract.py fails
# where it is stale.
ENGINES: tuple[str, ...] = tuple(schema()["$defs"]["endpoint"]["properties"]["engine"]["enum"])


def _validate(data: dict, where: str, from_env: set[str]) -> None:
    show = partial(_show, from_env=from_env)
    found = schema_errors.problems(_with_registered(schema()), data, show, "a mapping")
    if found:
        lines = [f"{where}: {p.where or '(top level)'}: {_reason(p)}" for p in found[:5]]
        more = len(found) - len(lines)
        if more > 0:
            lines.append(f"... and {more} more problem(s)")
        raise FleetError("\n".join(lines))


def _with_registered(base: dict) -> dict:
    """The schema with the `expect:` keys of claims registered outside the package."""
    registered = expect_schemas()
    if not registered:
        return base
    extended = copy.deepcopy(base)  # the cached schema stays the built-in one
    extended["$defs"]["expect"]["properties"].update(registered)
    return extended


def _reason(problem: schema_errors.SchemaProblem) -> str:
    """The schema's sentence, or what this schema's own patterns mean."""
    if problem.keyword == "propertyNames":
        return f"endpoint name {problem.shown} may hold only letters, digits and . _ : -"
    if problem.keyword == "pattern" and problem.path[-1:] == ("url",):
        return f"{problem.shown} is not an http(s) URL"
    return problem.reason


def _show(value: Any, path: schema_errors.Path = (), *, from_env: set[str]) -> str:
    if path[-1:] == ("api_key",):
        return "(the value is a secret and is not shown)"
    text = repr(value)
    if any(len(env) >= 4 and env in text for env in from_env):
        return "(a value from the environment, not shown)"  # it may be a key: never echo it
    return schema_errors.short(value)
