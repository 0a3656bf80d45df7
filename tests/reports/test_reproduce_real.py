"""Every reproduce line in a failing run's Markdown runs as pasted: against a live real
llama.cpp that fails several checks for different reasons (a wrong alias, tools and reasoning
where the server cannot, a perf floor it does not reach, more slots than it has), each line,
run with bash and the fleet's ${VAR} exported, reaches the server on the route its check read
and gets an answer there: no refused connection, no 404, no 401 from a key left unexpanded."""

import re
import shutil
import subprocess

import pytest

pytestmark = pytest.mark.real

KEY = "sk-reproduce-4242"
BLOCK = re.compile(r"\n  reproduce:\n\n  ```sh\n(?P<lines>.*?)\n  ```", re.S)
ROW = re.compile(r"^- \*\*(?P<verdict>\w+)\*\* `(?P<test>test_\w+)\[(?P<ep>[\w-]+)\]`", re.M)


def _route(test: str, api: str) -> str:
    """The route each failing check read: the model list, the slot shape, or generations."""
    if test == "test_alias":
        return "/v1/models"
    if test == "test_slots":
        return "/props"
    return {"chat": "/v1/chat/completions", "messages": "/v1/messages"}[api]


def test_every_reproduce_line_of_a_failing_run_runs_as_pasted(llama, run_fleet, pytester):
    if not shutil.which("curl"):
        pytest.skip("curl is not installed")
    # No --jinja: tools get a 500, thinking stays in the content; two slots, not four.
    server = llama(alias="served", api_key=KEY, jinja=False, parallel=2, ctx_size=4096)
    entry = {"url": server.url, "engine": "llamacpp", "api_key": "${TEAM_KEY}",
             "alias": "wrong-name"}
    fleet = {"endpoints": {
        "chat": {**entry, "expect": {"reasoning": True, "tools": True, "slots": {"count": 4},
                                     "perf": {"min_decode_tps": 1000000, "runs": 1}}},
        "messages": {**entry, "api": "messages", "expect": {"tools": True}}}}
    run_fleet(fleet, "--frank-report=run.md", env={"TEAM_KEY": KEY})
    report = (pytester.path / "run.md").read_text()
    rows = list(ROW.finditer(report))
    ran = {}
    for row, after in zip(rows, [*rows[1:], None]):
        text = report[row.end():after.start() if after else len(report)]
        block = BLOCK.search(text)
        if row["verdict"] != "FAIL":
            continue
        assert block, f"{row['test']}[{row['ep']}] fails without a reproduce line"
        pasted = "\n".join(line[2:] for line in block["lines"].split("\n"))
        api = fleet["endpoints"][row["ep"]].get("api", "chat")
        route = _route(row["test"], api)
        assert f"{server.url}{route} " in pasted, (row["test"], route, pasted[:300])
        done = subprocess.run(["bash", "-c", pasted], capture_output=True, text=True, timeout=60,
                              env={"PATH": "/usr/bin:/bin", "TEAM_KEY": KEY})
        answer = done.stdout
        assert done.returncode == 0 and answer.strip(), (row["test"], done.stderr, pasted[:300])
        assert '"code":404' not in answer.replace(" ", "") and "Not Found" not in answer, answer
        assert "Invalid API Key" not in answer, (row["test"], answer[:300])
        ran[f"{row['test']}[{row['ep']}]"] = route
    claims = {name.split("[")[0].split("_")[1] for name in ran}
    assert {"alias", "reasoning", "tools", "perf", "slots"} <= claims, ran
    assert any(name.endswith("[messages]") and route == "/v1/messages"
               for name, route in ran.items()), ran
    print(f"{len(ran)} reproduce lines ran as pasted: {sorted(ran)}")
