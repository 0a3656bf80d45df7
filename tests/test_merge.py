"""`--frank-shard I/N` and `frank merge`: the split is stable and complete, a bad spec is a
usage error, and the merge refuses what it cannot join and names what no shard ran. The records
here are written by `Run.to_json`, as a run writes them; a real merge of three real shards is
tests/test_merge_real.py."""

import json
import random
import string

import pytest

from pytest_frank import merge
from pytest_frank.results import EndpointInfo, Row, Run, load
from pytest_frank.shard import Shard, ShardError, shard_of

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
    merged = load(out / "m.json")
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
    assert load(tmp_path / "m.json").fleet_endpoints == ["beta", "good", "gone"]


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

    assert COMMANDS["merge"][0] == "pytest_frank.merge"


def test_a_shard_the_hash_left_empty_passes_and_records_the_fleet(run_fleet, pytester):
    """A runner of a matrix wider than the fleet has nothing to verify: no failure (pytest's
    exit 5), and its record still names the fleet's endpoints for the merge."""
    fleet = {"endpoints": {"beta": {"url": "http://127.0.0.1:9", "engine": "llamacpp",
                                    "alias": "m"}}}
    result = run_fleet(fleet, "--frank-shard=2/3", "--frank-json=r.json")
    assert result.ret == pytest.ExitCode.OK
    result.stdout.fnmatch_lines(["frank: shard 2/3: no endpoint; the other shards' 1 endpoint(s) "
                                 "deselected"])
    run = load(pytester.path / "r.json")
    assert run.shard == "2/3" and run.fleet_endpoints == ["beta"] and not run.endpoints
