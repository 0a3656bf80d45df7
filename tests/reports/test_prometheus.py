"""--frank-prometheus and --frank-pushgateway: the run as Prometheus metrics.

A real llama.cpp (the shared plain self-test server) beside an endpoint nothing listens on: the
textfile parses back with prometheus-client's own parser, every asked claim of both endpoints is
a series (the dead one's 0), the figures equal the JSON report's, and a loopback HTTP server
standing in for a Pushgateway (the test's own, as no Pushgateway runs here) receives the same
metrics. The atomic write and the label hygiene are checked on the renderer directly."""

from __future__ import annotations

import json
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from prometheus_client.parser import text_string_to_metric_families

from pytest_frank.reports import prometheus
from pytest_frank.record.results import Row, Run, read_run
from pytest_frank.outcome.verdict import Verdict

pytestmark = pytest.mark.real

SECRET = "sk-prom-secret-7781"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def samples(text: str) -> dict[tuple[str, tuple], float]:
    """(sample name, sorted labels) -> value, from Prometheus text."""
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def series(found, name, **labels):
    return {k: v for k, v in found.items()
            if k[0] == name and all(dict(k[1]).get(n) == x for n, x in labels.items())}


class Gateway:
    """A loopback HTTP server that keeps what a Pushgateway client sends."""

    def __init__(self):
        self.received: list[tuple[str, str, bytes]] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_PUT(self):
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                outer.received.append((self.command, self.path, body))
                self.send_response(200)
                self.end_headers()

            do_POST = do_PUT

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def gateway():
    gw = Gateway()
    yield gw
    gw.close()


def test_textfile_and_push_carry_every_claim_and_the_json_figures(llama, run_fleet, pytester,
                                                                   gateway):
    server = llama(alias="frank-default-large")
    expect = {"perf": {"runs": 1}, "slots": {"count": 1}, "tools": True,
              "vram": {"ctx_size": 4096, "gpu_mib": 1024, "fixed_mib": 64}}
    fleet = {"endpoints": {
        "up": {"url": server.url, "engine": "llamacpp", "alias": "frank-default-large",
               "api_key": SECRET, "expect": expect},
        "down": {"url": f"http://127.0.0.1:{free_port()}", "engine": "llamacpp",
                 "alias": "frank-default-large", "api_key": SECRET, "ready_timeout": 1,
                 "expect": expect}}}
    result = run_fleet(fleet, "--frank-json=run.json", "--frank-prometheus=metrics/frank.prom",
                       f"--frank-pushgateway={gateway.url}")
    assert result.ret == 1  # the dead endpoint fails its health check
    textfile = (pytester.path / "metrics" / "frank.prom").read_text()
    assert SECRET not in textfile
    found = samples(textfile)
    record = json.loads((pytester.path / "run.json").read_text())

    asked = {"health", "alias", "chat", "perf", "slots", "tools", "vram", "contract"}
    matrix = read_run(pytester.path / "run.json").matrix()  # the JSON report's verdict per claim
    for endpoint in ("up", "down"):
        claims = {dict(k[1])["claim"]: v
                  for k, v in series(found, "frank_claim_success", endpoint=endpoint).items()}
        assert set(claims) == asked, endpoint
        assert claims == {c: float(v is Verdict.PASS) for c, v in matrix[endpoint].items()}
    assert set(series(found, "frank_claim_success", endpoint="down").values()) == {0.0}
    assert {"health", "alias", "chat", "slots"} <= {dict(k[1])["claim"] for k, v in series(
        found, "frank_claim_success", endpoint="up").items() if v == 1.0}

    tests = series(found, "frank_test_success")
    ran = [r for r in record["rows"] if r["verdict"] not in ("not asked", "not applicable", "skipped")]
    assert {dict(k[1])["test"] for k in tests} == {r["key"].split("::")[-1] for r in ran}
    assert any(r["verdict"] == "blocked" for r in ran)  # the dead endpoint's, shown as 0
    for row in record["rows"]:
        if row in ran:
            got = series(found, "frank_test_success", test=row["key"].split("::")[-1])
            assert list(got.values()) == [1.0 if row["verdict"] == "pass" else 0.0]

    compared = 0
    for row in record["rows"]:
        for name, figure in row["figures"].items():
            if name not in prometheus.FIGURES:
                continue
            metric, _, factor = prometheus.FIGURES[name]
            got = series(found, metric, endpoint=row["endpoint"], test=row["key"].split("::")[-1])
            assert list(got.values()) == [pytest.approx(figure["value"] * factor, rel=1e-12)]
            compared += 1
    assert compared >= 3  # ttft, decode speed, modelled vram at least

    (info,) = series(found, "frank_info").items()
    assert dict(info[0][1])["sha256"] == record["sha256"]
    assert dict(info[0][1])["version"] == record["version"]
    assert series(found, "frank_run_timestamp_seconds")
    (duration,) = series(found, "frank_run_duration_seconds").values()
    assert duration == pytest.approx(record["duration_s"])

    (method, path, body) = gateway.received[-1]
    assert method == "PUT" and path.startswith("/metrics/job/pytest_frank/fleet")
    assert samples(body.decode()) == found  # the same metrics as the textfile
    assert SECRET.encode() not in body


def test_a_gateway_that_is_down_leaves_the_verdicts_alone(llama, run_fleet):
    server = llama(alias="frank-default-large")
    fleet = {"endpoints": {"up": {"url": server.url, "engine": "llamacpp",
                                  "alias": "frank-default-large"}}}
    result = run_fleet(fleet, f"--frank-pushgateway=http://127.0.0.1:{free_port()}")
    assert result.ret == 0
    result.stdout.fnmatch_lines(["*--frank-pushgateway http://127.0.0.1:*: the push failed (*); "
                                 "the verdicts stand, the metrics were not pushed"])


def _run(fleet="fleet.yaml", endpoint="ep", rows=3) -> Run:
    made = [Row(key=f"m::test_{i}[{endpoint}]", endpoint=endpoint, claim=f"claim{i}",
                verdict=Verdict.PASS if i % 2 else Verdict.FAIL,
                figures={"ttft_s": {"value": 0.25 * i, "unit": "s"}}) for i in range(rows)]
    return Run(fleet=fleet, sha256="ab" * 32, version="1.0", rows=made, started=1.7e9,
               duration_s=12.5)


def test_label_values_are_escaped_and_secrets_masked(fresh_state):
    from pytest_frank.base import redact

    redact.register(SECRET)
    odd = f'/srv/ops/"night"\\{SECRET}\nfleet.yaml'
    text = prometheus.text(_run(fleet=odd, endpoint="gpu-1.a:b")).decode()
    assert SECRET not in text
    assert '\\"night\\"' in text and "\\\\" in text and "\\n" in text  # escaped, one line each
    found = samples(text)
    fleets = {dict(k[1]).get("fleet") for k in found}
    assert fleets == {odd.replace(SECRET, "***")}


def test_the_load_ladder_is_one_series_per_level():
    run = _run(rows=0)
    run.rows = [Row(key="m::test_load[ep]", endpoint="ep", claim="load", verdict=Verdict.PASS,
                    figures={"ttft_p90_s_at_1": {"value": 0.05, "unit": "s"},
                             "ttft_p90_s_at_4": {"value": 0.2, "unit": "s"},
                             "aggregate_tps_at_4": {"value": 1170.0, "unit": "tok/s"},
                             "error_rate": {"value": 0.0, "unit": "", "max": 0.0}})]
    found = samples(prometheus.text(run).decode())
    p90 = series(found, "frank_load_ttft_p90_seconds", endpoint="ep", test="test_load[ep]")
    assert {dict(k[1])["in_flight"]: v for k, v in p90.items()} == {"1": 0.05, "4": 0.2}
    assert list(series(found, "frank_load_tokens_per_second", in_flight="4").values()) == [1170]
    assert list(series(found, "frank_load_error_ratio", endpoint="ep").values()) == [0.0]


def test_undecided_claims_are_neither_success_nor_failure():
    run = _run(rows=0)
    run.rows = [Row(key="m::test_a[ep]", endpoint="ep", claim="spec_decode",
                    verdict=Verdict.INCONCLUSIVE),
                Row(key="m::test_b[ep]", endpoint="ep", claim="health", verdict=Verdict.PASS)]
    found = samples(prometheus.text(run).decode())
    spec = dict(claim="spec_decode", endpoint="ep")
    assert list(series(found, "frank_claim_success", **spec).values()) == [0.0]
    assert list(series(found, "frank_claim_inconclusive", **spec).values()) == [1.0]
    assert list(series(found, "frank_claim_inconclusive", claim="health").values()) == [0.0]


def test_regressions_are_a_series_per_endpoint_zero_where_none():
    run = _run(rows=0)
    run.rows = [Row(key="m::test_a[ep]", endpoint="ep", claim="perf", verdict=Verdict.PASS),
                Row(key="m::test_b[calm]", endpoint="calm", claim="perf", verdict=Verdict.PASS)]
    run.regressions = [{"test": "test_a[ep]", "endpoint": "ep", "what": "decode speed 100 -> 60"},
                       {"test": "cost", "endpoint": "ep", "what": "tokens generated 1 -> 9"}]
    run.noise = [{"test": "test_b[calm]", "endpoint": "calm", "what": "within the spread"}]
    found = samples(prometheus.text(run).decode())
    assert {dict(k[1])["endpoint"]: v for k, v in series(found, "frank_regressions").items()} \
        == {"ep": 2.0, "calm": 0.0}


def test_the_textfile_is_replaced_whole(tmp_path):
    """A reader polling the file while it is rewritten sees one whole file or the other."""
    path = tmp_path / "frank.prom"
    small, large = _run(rows=1), _run(rows=150)
    whole = {prometheus.text(small), prometheus.text(large)}
    prometheus.write(small, path)
    seen, stop = [], threading.Event()

    def read():
        while not stop.is_set():
            seen.append(path.read_bytes())

    reader = threading.Thread(target=read)
    reader.start()
    for i in range(40):
        prometheus.write(large if i % 2 else small, path)
    stop.set()
    reader.join()
    assert seen and set(seen) <= whole
    assert oct(path.stat().st_mode & 0o777) == "0o644"
    assert [p.name for p in tmp_path.iterdir()] == ["frank.prom"]  # no temp file left


def test_a_failed_write_keeps_the_old_file(tmp_path, monkeypatch):
    path = tmp_path / "frank.prom"
    prometheus.write(_run(rows=1), path)
    before = path.read_bytes()

    def broken(run):
        raise OSError("disk full")

    monkeypatch.setattr(prometheus, "text", broken)
    with pytest.raises(OSError):
        prometheus.write(_run(rows=5), path)
    assert path.read_bytes() == before
    assert [p.name for p in tmp_path.iterdir()] == ["frank.prom"]
