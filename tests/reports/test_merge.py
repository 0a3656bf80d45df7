"""`--frank-shard I/N` and `frank merge`: the split is stable and complete, a bad spec is a
usage error, and the merge refuses what it cannot join and names what no shard ran. The records
here are written by `Run.to_json`, as a run writes them; a real merge of three real shards is
tests/reports/test_merge_real.py."""

import json
import random
import string
from dataclasses import MISSING, fields

import pytest

from pytest_frank.reports import merge
from pytest_frank.record.results import (FLEET, IDENTITY, ROWS, SPEND, EndpointInfo, Payload, Row, Run,
                                  read_run)
from pytest_frank.base.shard import Shard, ShardError, shard_of
from pytest_frank.outcome.verdict import Verdict

pytestmark = pytest.mark.unit


# ------------------------------------------------------------------------- the split

def test_every_endpoint_is_in_exactly_one_shard():
    names = ["".join(random.Random(i).choices(string.ascii_lowercase + "-", k=8)) for i in range(200)]
    for total in (1, 2, 3, 5, 8):
        shards = [Shard(i, total) for i in range(1, total + 1)]
        for name in names:
            assert sum(shard.holds(name) for shard in shards) == 1, (name, total)
        sizes = [sum(shard.holds(n) for n in names) for shard in shards]
        assert min(sizes) > 200 / total / 2, sizes  # a hash spreads them, no shard is starved


def test_an_endpoints_shard_depends_on_its_name_alone():
    """Fleet order, and endpoints added or dropped elsewhere, move no endpoint: the digest is
    fixed (sha256), not Python's per-process hash()."""
    assert [shard_of(n, 3) for n in ("beta", "good", "gone")] == [1, 2, 3]
    assert shard_of("frank-selftest-draft", 4) == shard_of("frank-selftest-draft", 4)


@pytest.mark.parametrize("spec", ["", "3", "0/3", "4/3", "1/0", "a/3", "-1/3", "1/3/5", "2 of 3"])
def test_a_shard_spec_that_is_not_i_of_n_is_refused(spec):
    with pytest.raises(ShardError, match="I/N|1 to N"):
        Shard.parse(spec)


def test_a_bad_shard_option_is_a_usage_error(run_fleet):
    fleet = {"endpoints": {"ep": {"url": "http://127.0.0.1:9", "engine": "llamacpp",
                                  "alias": "m"}}}
    for spec in ("4/3", "x"):
        result = run_fleet(fleet, f"--frank-shard={spec}")
        assert result.ret == pytest.ExitCode.USAGE_ERROR
        assert f"pytest-frank: --frank-shard '{spec}'" in result.stderr.str()
        assert "Traceback" not in result.stderr.str()


# ------------------------------------------------------------------------- the merge

def record(tmp_path, name: str, rows: dict[str, str], *, fleet="fleet.yaml", sha="a" * 64,
           endpoints=("beta", "good", "gone"), shard: str | None = None):
    """A shard's record: `rows` is endpoint -> the verdict of its test_health."""
    run = Run(fleet=fleet, sha256=sha, version="0.1.0", started=100.0, duration_s=2.0,
              endpoints={n: EndpointInfo(name=n, engine="llamacpp", generations=1, tokens=4)
                         for n in rows},
              rows=[Row(key=f"test_health::test_health[{n}]", endpoint=n, claim="health",
                        verdict=v) for n, v in rows.items()],
              fleet_endpoints=list(endpoints), shard=shard)
    path = tmp_path / name
    path.write_text(run.to_json())
    return str(path)


def test_shards_merge_into_one_record_in_fleet_order(tmp_path, capsys):
    a = record(tmp_path, "a.json", {"gone": "FAIL"}, shard="3/3")
    b = record(tmp_path, "b.json", {"good": "pass", "beta": "pass"}, shard="1/3")
    out = tmp_path / "out"
    code = merge.main([a, b, "--frank-json", str(out / "m.json"), "--frank-report",
                       str(out / "m.md"), "--html", str(out / "m.html"),
                       "--frank-prometheus", str(out / "m.prom")])
    assert code == 1  # a test failed: the merge job gates as the run would
    merged = read_run(out / "m.json")
    assert list(merged.endpoints) == ["beta", "good", "gone"]  # the fleet's order, not the files'
    assert [r.endpoint for r in merged.rows] == ["gone", "good", "beta"]
    assert merged.shard is None and merged.endpoints["good"].generations == 1
    assert "| gone | FAIL |" in (out / "m.md").read_text()
    page = (out / "m.html").read_text()
    assert page.startswith("<!DOCTYPE html>") and "<script" not in page and 'class="matrix"' in page
    prom = (out / "m.prom").read_text()
    assert 'frank_claim_success{claim="health",endpoint="gone",fleet="fleet.yaml"} 0.0' in prom
    assert 'frank_claim_success{claim="health",endpoint="good",fleet="fleet.yaml"} 1.0' in prom
    assert "2 records, 3 tests, 1 failed, 3 endpoints" in capsys.readouterr().out


def test_records_of_different_fleet_files_are_refused_unless_asked(tmp_path, capsys):
    a = record(tmp_path, "a.json", {"good": "pass"})
    b = record(tmp_path, "b.json", {"beta": "pass", "gone": "pass"}, fleet="other.yaml",
               sha="b" * 64)
    assert merge.main([a, b, "--frank-report", str(tmp_path / "m.md")]) == 2
    err = capsys.readouterr().err
    assert f"frank merge: {b}: a record of fleet file other.yaml (sha256 bbbbbbbbbbbb), not of " \
           f"{a}'s fleet.yaml (sha256 aaaaaaaaaaaa)" in err and "--allow-mixed-fleets" in err
    assert not (tmp_path / "m.md").exists()
    assert merge.main([a, b, "--allow-mixed-fleets", "--frank-report",
                       str(tmp_path / "m.md")]) == 0
    assert "fleet.yaml, other.yaml" in (tmp_path / "m.md").read_text()


def test_an_endpoint_no_shard_ran_is_reported_and_fails_the_merge(tmp_path, capsys):
    a = record(tmp_path, "a.json", {"good": "pass"})
    b = record(tmp_path, "b.json", {"beta": "pass"})
    assert merge.main([a, b, "--frank-json", str(tmp_path / "m.json")]) == 1
    assert "frank merge: gone: in the fleet file, but no record ran it" in capsys.readouterr().err
    assert read_run(tmp_path / "m.json").fleet_endpoints == ["beta", "good", "gone"]


def test_a_test_in_two_records_is_refused(tmp_path, capsys):
    a = record(tmp_path, "a.json", {"good": "pass"})
    assert merge.main([a, a]) == 2
    assert f"frank merge: {a}: test_health::test_health[good] is in {a} too" in \
        capsys.readouterr().err


@pytest.mark.parametrize("content,reason", [
    (None, "no such file"),
    ("{not json", "not a pytest-frank JSON file"),
    (json.dumps({"format": "other"}), 'no "format": "pytest-frank/1"'),
    (json.dumps({"format": "pytest-frank/1", "rows": [{"verdict": "meh"}]}), "unknown verdict"),
])
def test_an_unreadable_record_is_a_usage_error_naming_it(tmp_path, capsys, content, reason):
    good = record(tmp_path, "a.json", {"good": "pass"})
    bad = tmp_path / "bad.json"
    if content is not None:
        bad.write_text(content)
    assert merge.main([good, str(bad)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"frank merge: {bad}: ") and reason in err and "Traceback" not in err


def test_a_report_the_disk_refuses_is_named(tmp_path, capsys):
    a = record(tmp_path, "a.json", {"good": "pass", "beta": "pass", "gone": "pass"})
    (tmp_path / "dir").mkdir()
    assert merge.main([a, "--frank-report", str(tmp_path / "dir")]) == 2
    assert f"frank merge: --frank-report {tmp_path / 'dir'}: not written (" in \
        capsys.readouterr().err


def test_the_frank_command_lists_merge():
    from pytest_frank.cli import COMMANDS

    assert COMMANDS["merge"][0] == "pytest_frank.reports.merge"


def test_a_shard_the_hash_left_empty_passes_and_records_the_fleet(run_fleet, pytester):
    """A runner of a matrix wider than the fleet has nothing to verify: no failure (pytest's
    exit 5), and its record still names the fleet's endpoints for the merge."""
    fleet = {"endpoints": {"beta": {"url": "http://127.0.0.1:9", "engine": "llamacpp",
                                    "alias": "m"}}}
    result = run_fleet(fleet, "--frank-shard=2/3", "--frank-json=r.json")
    assert result.ret == pytest.ExitCode.OK
    result.stdout.fnmatch_lines(["frank: shard 2/3: no endpoint; the other shards' 1 endpoint(s) "
                                 "deselected"])
    run = read_run(pytester.path / "r.json")
    assert run.shard == "2/3" and run.fleet_endpoints == ["beta"] and not run.endpoints


# ------------------------------------------------------------------------- field by field

def _every_field_set(record) -> None:
    """The sample below sets every field off its default: a field added to a record and not to
    the sample fails here, so the round trips below cover it."""
    for f in fields(record):
        default = f.default_factory() if f.default_factory is not MISSING else f.default
        assert getattr(record, f.name) != default, f"{type(record).__name__}.{f.name}: set it"


def _endpoint(name: str, **spent) -> EndpointInfo:
    return EndpointInfo(**{"name": name, "engine": "vllm", "url": "http://127.0.0.1:8000",
                           "build": "0.32.0", "models": ["m"], "launch_log": "log",
                           "description": "the wiki's", "generations": 3, "tokens": 40,
                           "min_tokens": 32, "time_to_verdict_s": 1.25, **spent})


def _row(endpoint: str, test: str = "test_health") -> Row:
    return Row(key=f"{test}::{test}[{endpoint}]", endpoint=endpoint, claim="health",
               verdict=Verdict.FAIL, line="why", fix="the fix", curl="curl -sS x",
               notes=["a note"], figures={"ttft_s": {"value": 0.1, "unit": "s"}},
               attachments=[{"name": "t", "mime": "text/plain", "data": "d"}],
               exchanges=[{"request": "GET /health", "status": 200, "elapsed_s": 0.01}])


def _run(*names: str, shard: str | None = "1/2", started: float = 100.0) -> Run:
    return Run(fleet="fleet.yaml", sha256="a" * 64, version="0.1.0",
               endpoints={n: _endpoint(n) for n in names}, rows=[_row(n) for n in names],
               regressions=[{"test": "t", "endpoint": names[0], "what": "slower"}],
               noise=[{"test": "t", "endpoint": names[0], "what": "within the spread"}],
               started=started, duration_s=2.0, fleet_endpoints=["beta", "good"], shard=shard,
               notes=["a note of the run's"], error="pytest-frank: a usage error",
               baseline={"file": "prev.json", "started": 50.0, "tests": len(names),
                         "figures": 2 * len(names), "regressions": 1, "noise": 1})


def test_every_field_of_the_record_has_its_merge_rule():
    assert set(merge.RULES) == {f.name for f in fields(Run)}, "a field of Run without a rule " \
        "in merge.RULES, or a rule for a field Run no longer has"
    for f in fields(EndpointInfo):
        assert callable(f.metadata.get("merge")), f"EndpointInfo.{f.name}: no merge rule"
        assert f.metadata.get("seen") in (FLEET, ROWS, IDENTITY, SPEND), \
            f"EndpointInfo.{f.name}: where a run learns it (results.rule)"


def test_the_json_round_trip_keeps_every_field(tmp_path):
    run = _run("beta", "good")
    for record in (run, run.endpoints["beta"], run.rows[0]):
        _every_field_set(record)
    path = tmp_path / "r.json"
    path.write_text(run.to_json())
    assert read_run(path) == run


def test_a_sharded_record_merges_into_the_unsharded_one_field_by_field(tmp_path):
    """Each endpoint in one shard (--frank-shard): the merged record is the whole run's, every
    field of every endpoint and row, the plan's minimum and the time to verdict included."""
    one, two = _run("beta", started=100.0), _run("good", started=101.0)
    two.duration_s = 1.0  # ends with the first: the whole run's span
    whole = _run("beta", "good", shard=None)
    whole.regressions = [*one.regressions, *two.regressions]  # each shard's own, against its
    whole.noise = [*one.noise, *two.noise]  # baseline's rows
    whole.baseline = {**whole.baseline, "regressions": 2, "noise": 2}  # each shard's, summed
    merged = merge.merge([("1.json", one), ("2.json", two)])
    for f in fields(EndpointInfo):
        for name in whole.endpoints:
            assert getattr(merged.endpoints[name], f.name) == \
                getattr(whole.endpoints[name], f.name), f"{name}'s {f.name}"
    for f in fields(Run):
        assert getattr(merged, f.name) == getattr(whole, f.name), f.name


def test_an_endpoint_in_two_records_merges_each_field_by_its_rule():
    """A -k split runs one endpoint in two records: its cost is summed, its time to verdict the
    longer runner's, what one record measured and the other did not is kept."""
    first = _run("good")
    first.endpoints["good"] = _endpoint("good", build=None, models=[], launch_log=None)
    second = _run("good")
    second.endpoints["good"] = _endpoint("good", generations=2, tokens=10, min_tokens=8,
                                         time_to_verdict_s=3.5)
    second.rows = [_row("good", "test_alias")]
    merged = merge.merge([("a.json", first), ("b.json", second)]).endpoints["good"]
    assert merged == _endpoint("good", generations=5, tokens=50, min_tokens=40,
                               time_to_verdict_s=3.5)


def test_the_xdist_payload_round_trip_keeps_every_field():
    """A row and what its test saw of the endpoint, through execnet's serializer as xdist sends
    a report: back as they were; what crosses beside the row is EndpointInfo's identity and
    spend fields, no other."""
    execnet = pytest.importorskip("execnet")
    from pytest_frank.runtime.target import Spend

    info = _endpoint("good")
    sent = Payload(_row("good"), identity={f.name: getattr(info, f.name) for f in fields(info)
                                           if f.metadata["seen"] == IDENTITY},
                   spend={f.name: getattr(info, f.name) for f in fields(info)
                          if f.metadata["seen"] == SPEND})
    for record in (sent, sent.row):
        _every_field_set(record)
    assert Payload.of(execnet.loads(execnet.dumps(sent.plain()))) == sent
    assert set(Spend().record()) == set(sent.spend)  # the spend snapshot fills every field
    with pytest.raises(TypeError, match="no spend field url"):
        EndpointInfo.seen({SPEND: {"url": "x"}})
