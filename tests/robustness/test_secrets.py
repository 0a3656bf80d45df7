"""No secret reaches any output: the terminal, JUnit XML, the pytest-html page, the Markdown
report and the JSON evidence. Keys echoed by an endpoint (whole, past a cut, or encoded),
environment values fleet.yaml puts where reports show them, and files fleet.yaml names (read,
never quoted). Endpoints are emulated: no engine echoes a key on purpose, but auth proxies in
front of them (LiteLLM, gateways) do."""

from __future__ import annotations

import base64
import json
from urllib.parse import quote, quote_plus

import pytest
from emulator import Emulator, Reply, serve_chat
from fleets import one_endpoint

from pytest_frank.base import redact

pytestmark = pytest.mark.emulated

# Characters each encoding changes: `/` and `+` (URL, base64 alphabet), `"` and `\` (JSON).
SECRET = 'sk-frank-S3CRET/7f3a+9c"1e\\5b'
REPORTS = {"junit": "out/junit.xml", "page": "out/page.html", "markdown": "out/report.md",
           "json": "out/run.json"}
ALL_REPORTS = ("--junitxml=out/junit.xml", "--html=out/page.html", "--self-contained-html",
               "--frank-report=out/report.md", "--frank-json=out/run.json")


def outputs(result, pytester) -> dict[str, str]:
    """The terminal and every report the run was asked for (each must have been written)."""
    found = {"terminal": result.stdout.str() + result.stderr.str()}
    for name, path in REPORTS.items():
        found[name] = (pytester.path / path).read_text(encoding="utf-8")
    return found


def base64_cores(secret: str) -> list[str]:
    """12 characters from the middle of the secret's base64 at each of the three alignments:
    what a longer base64 string (a data: URL, a self-contained page's blob) would hold."""
    raw = secret.encode()
    return [base64.b64encode(b"\0" * shift + raw).decode()[4:16] for shift in range(3)]


def assert_nowhere(texts: dict[str, str], secret: str) -> None:
    """Neither the secret, nor its first 10 characters, nor a base64 copy, in any output."""
    telling = [secret, secret[:10], *base64_cores(secret)]
    for where, text in texts.items():
        for part in telling:
            assert part not in text, f"{part!r} in the {where} output"


# -- keys echoed by an endpoint ------------------------------------------------------------------

def test_a_key_behind_300_characters_is_masked_before_the_cut(run_fleet, pytester):
    """A vLLM behind an auth proxy that echoes the rejected key at the end of a long 401."""
    message = "Invalid API key: " + "." * 273 + SECRET  # a cut at 300 keeps the key's first 10
    with Emulator("vllm", models=["m"]) as em:
        em.route("GET", "/v1/models", lambda r: Reply(401, {"error": {"message": message}}))
        serve_chat(em, lambda body: Reply(401, {"error": {"message": message}}))
        result = run_fleet(one_endpoint(em.url, "vllm", alias="m", api_key=SECRET,
                                        expect={"reasoning": True}), *ALL_REPORTS)
    # health answers; alias is refused, and chat and reasoning's three tests are blocked,
    # each quoting the refusal (the cut at 300 falls after the key there too)
    result.assert_outcomes(passed=1, failed=1, skipped=4)
    texts = outputs(result, pytester)
    assert_nowhere(texts, SECRET)
    assert "answered 401: Invalid API key: ....." in texts["terminal"]
    assert texts["terminal"].count("see test_alias[ep]: GET /v1/models answered 401: Invalid "
                                   "API key: .....") == 4


FORMS = {
    "base64": base64.b64encode(SECRET.encode()).decode(),
    "base64 inside a longer one": base64.b64encode(b"{" + SECRET.encode() + b"}").decode(),
    "url-encoded": quote(SECRET, safe=""),
    "url-encoded, path safe": quote(SECRET),
    "form-encoded": quote_plus(SECRET),
    "json-escaped": json.dumps(SECRET)[1:-1],
}


@pytest.mark.parametrize("form", FORMS)
def test_an_encoded_copy_of_the_key_is_masked(run_fleet, pytester, form):
    """An OpenAI-compatible gateway whose 401 body carries the key it got in another form."""
    copy = FORMS[form]
    assert copy != SECRET
    body = f'{{"error": {{"message": "Invalid API key {copy}", "type": "auth_error"}}}}'
    with Emulator("vllm", models=["m"]) as em:
        em.route("GET", "/v1/models", lambda r: Reply(401, body,
                                                      {"content-type": "application/json"}))
        result = run_fleet(one_endpoint(em.url, "vllm", alias="m", api_key=SECRET),
                           "-m", "alias", *ALL_REPORTS)
    result.assert_outcomes(failed=1)
    texts = outputs(result, pytester)
    assert_nowhere(texts, SECRET)
    for where, text in texts.items():
        assert copy not in text and copy[:10] not in text, f"{form} copy in the {where} output"
    line = next(line for line in texts["terminal"].splitlines() if "answered 401" in line)
    assert "answered 401: Invalid API key " in line and "***" in line  # there, masked


# -- environment values in fleet.yaml ------------------------------------------------------------

ENV_SECRET = "sk-frank-S3CRET-7f3a9c1e5b"


def test_alias_and_description_from_a_credential_variable_are_masked(run_fleet, pytester):
    """A vLLM serving `frank-hostile`; fleet.yaml (edited in a pull request) names the model and
    describes the endpoint with ${FRANK_TEST_SECRET}, a CI secret the run can read."""
    fleet = ("endpoints:\n  ep:\n    url: URL\n    engine: vllm\n"
             "    alias: ${FRANK_TEST_SECRET}\n    description: \"key ${FRANK_TEST_SECRET}\"\n")
    with Emulator("vllm", models=["frank-hostile"]) as em:
        result = run_fleet(fleet.replace("URL", em.url), "-m", "health or alias", *ALL_REPORTS,
                           env={"FRANK_TEST_SECRET": ENV_SECRET})
    result.assert_outcomes(passed=1, failed=1)
    texts = outputs(result, pytester)
    assert_nowhere(texts, ENV_SECRET)
    terminal = texts["terminal"]
    assert "'***' is not served" in terminal, terminal  # the diagnosis stays, the value goes
    assert "--served-model-name frank-hostile ***" in terminal  # the fix, masked too
    assert "key ***" in texts["page"] and "key ***" in texts["json"]


OTHER = "plain-value-4471-abcdef"


@pytest.mark.parametrize("how", [("--frank-mask-env", "FRANK_TEST_PLAIN"),
                                 ("-o", "frank_mask_env=FRANK_TEST_UNRELATED FRANK_TEST_PLAIN")])
def test_mask_env_masks_a_variable_of_any_name(run_fleet, pytester, how):
    """A gateway that echoes a deployment value (not credential-named, not in fleet.yaml) in its
    errors; --frank-mask-env (or the ini frank_mask_env) makes it a secret."""
    with Emulator("vllm", models=["m"]) as em:
        em.route("GET", "/v1/models", lambda r: Reply(500, {"error": {"message": f"{OTHER} "
                                                                                 "is down"}}))
        fleet = one_endpoint(em.url, "vllm", alias="m")
        plain = run_fleet(fleet, "-m", "alias", env={"FRANK_TEST_PLAIN": OTHER})
        assert OTHER in plain.stdout.str()  # the name alone does not make it a secret
        result = run_fleet(fleet, "-m", "alias", *how, *ALL_REPORTS)
    result.assert_outcomes(failed=1)
    texts = outputs(result, pytester)
    assert_nowhere(texts, OTHER)
    assert "answered 500: *** is down" in texts["terminal"]


# -- files fleet.yaml names ----------------------------------------------------------------------

MARKER = "MARKER-7731"
PASSWD = f"root:x:0:0:{MARKER}:/root:/bin/bash"


def gate_fleet(serve=None, **extra) -> dict:
    """A vLLM endpoint for the offline gate: its serve files are read, nothing is reached."""
    entry = {"url": "http://127.0.0.1:8000", "engine": "vllm", "alias": "m", **extra}
    if serve:
        entry["serve"] = serve
    return {"endpoints": {"ep": entry}}


@pytest.mark.parametrize("key,text,line,expected", [
    ("unit", f"[Service]\nExecStart=/usr/bin/vllm serve /m\n{PASSWD}\n", 3,
     "the line is not a Key=value assignment, a [Section] header or a comment: expected a "
     "systemd unit"),
    ("env", f"MODEL=/m\n{PASSWD}\n", 2,
     "the line runs a command, not NAME=value: expected an env file"),
])
def test_a_serve_file_that_is_something_else_is_named_not_quoted(run_fleet, pytester, key, text,
                                                                 line, expected):
    """The offline gate of a vLLM endpoint whose fleet.yaml (edited in a pull request) points a
    serve file at a password file."""
    path = pytester.path / "secret.txt"
    path.write_text(text)
    serve = {key: str(path), **({"command": "vllm serve /m"} if key == "env" else {})}
    result = run_fleet(gate_fleet(serve), "--frank-offline", *ALL_REPORTS)
    result.assert_outcomes(failed=1)
    texts = outputs(result, pytester)
    for where, out in texts.items():
        assert MARKER not in out and "root:x:0" not in out, f"the file's line in the {where} output"
    assert f"{path}:{line}: {expected}" in texts["terminal"].replace("\n", " ")
    assert f"secret.txt:{line}:" in texts["json"] and f"secret.txt:{line}:" in texts["junit"]


def test_a_models_json_that_is_something_else_is_named_not_quoted(run_fleet, pytester):
    """reasoning_effort.from (a client's models.json, for a vLLM endpoint) pointed at a password
    file: fleet.yaml cannot be used, and the usage error names the line, not its text."""
    path = pytester.path / "secret.txt"
    path.write_text(f"{PASSWD}\n")
    fleet = gate_fleet(expect={"reasoning_effort": {"from": str(path)}})
    result = run_fleet(fleet, *ALL_REPORTS)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    texts = outputs(result, pytester)  # a usage error writes each report, with the error
    for where, text in texts.items():
        assert MARKER not in text and "root:x:0" not in text, where
    assert f"{path}:1: not valid JSON (Expecting value): expected a pi models.json" \
        in texts["terminal"]
    assert f"{path}:1: not valid JSON" in json.loads(texts["json"])["error"]


SERVE_KEY = "sk-serve-9f8e7d6c5b4a"
HF_TOKEN = "hf_Secr3tTokenValue42"


def test_a_key_on_the_serve_command_line_of_a_finding_is_masked(run_fleet, pytester):
    """A vLLM started with --api-key on the command line that listens on the wrong port: the
    finding is about that line, and names the flag, never the key."""
    serve = {"command": f"vllm serve /m --api-key {SERVE_KEY} --port 9999 "
                        f"--hf-token={HF_TOKEN}"}
    result = run_fleet(gate_fleet(serve), "--frank-offline", *ALL_REPORTS)
    result.assert_outcomes(failed=1)
    texts = outputs(result, pytester)
    assert "serve.command:1: the serve command listens on port 9999" in texts["terminal"]
    assert_nowhere(texts, SERVE_KEY)
    assert_nowhere(texts, HF_TOKEN)


@pytest.mark.parametrize("env_line,unit_line,finding", [
    # systemd keeps the `$` of an EnvironmentFile= value: a note about the HF_TOKEN line
    (f"HF_TOKEN={HF_TOKEN}$x", "EnvironmentFile={env}",
     "{env}:1: HF_TOKEN: systemd does not expand variables in an EnvironmentFile="),
    # an Environment= whose quote is never closed: the unit cannot be read past it
    (None, f'Environment="HF_TOKEN={HF_TOKEN}',
     "{unit}:3: Environment=: a double quote is never closed"),
])
def test_a_token_in_a_units_environment_never_appears(run_fleet, pytester, env_line, unit_line,
                                                      finding):
    """A vLLM unit whose environment holds a Hugging Face token, on a line the
    gate has something to say about: the diagnosis names the variable, not its value."""
    env, unit = pytester.path / "vllm.env", pytester.path / "vllm.service"
    if env_line:
        env.write_text(env_line + "\n")
    unit.write_text(f"[Service]\nExecStart=/usr/bin/vllm serve /m --port 9999\n"
                    f"{unit_line.format(env=env)}\n")
    result = run_fleet(gate_fleet({"unit": str(unit)}), "--frank-offline", *ALL_REPORTS)
    result.assert_outcomes(failed=1)  # the port, or the unreadable unit
    texts = outputs(result, pytester)
    assert_nowhere(texts, HF_TOKEN)
    assert finding.format(env=env, unit=unit) in texts["json"]


@pytest.mark.parametrize("value", ["8192", "0.9", "true", "none", "EMPTY"])
def test_a_count_under_a_credential_like_name_is_no_secret(fresh_state, value):
    """MAX_NUM_BATCHED_TOKENS=8192 or PASSES=3: a name guess also catches counts and switches,
    and masking them would blank every context size in the reports."""
    redact.register_credential(value)
    assert redact.scrub(f"ctx {value}") == f"ctx {value}"
    redact.register_credential("hf_S3cr3tT0kenValue")
    assert redact.scrub("token hf_S3cr3tT0kenValue") == "token ***"
