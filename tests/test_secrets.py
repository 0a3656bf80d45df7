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

from pytest_frank import redact

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
    result.assert_outcomes(passed=1, failed=4)  # health answers; alias and reasoning are refused
    texts = outputs(result, pytester)
    assert_nowhere(texts, SECRET)
    assert "answered 401: Invalid API key: ....." in texts["terminal"]


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
def test_mask_env_masks_a_variable_of_any_name(run_fleet, pytester, monkeypatch, how):
    """A gateway that echoes a deployment value (not credential-named, not in fleet.yaml) in its
    errors; --frank-mask-env (or the ini frank_mask_env) makes it a secret."""
    for registry in ("_SECRETS", "_FORMS"):  # in-process runs share them: start from none
        monkeypatch.setattr(redact, registry, set())
    monkeypatch.setattr(redact, "_PATTERN", None)
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
