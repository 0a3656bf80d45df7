"""Diagnoses an ops engineer can act on: the engine fleet.yaml names is wrong, a key is missing,
the URL points at another server, the slot advice keeps each slot's context, the alias advice
keeps the names served, a launched endpoint's advice names fleet.yaml keys, a loading server is
waited for as long as configured. Real llama.cpp where it shows the fault, the emulator else."""

import pytest

from emulator import Emulator, Reply
from fleets import one_endpoint


@pytest.fixture(scope="module")
def two_slots(llama):
    return llama(alias=["frank-a", "frank-b"], ctx_size=8192, parallel=2, metrics=True)


def test_a_llamacpp_called_vllm_says_so_first(two_slots, run_fleet):
    result = run_fleet(one_endpoint(two_slots.url, "vllm", alias="frank-a",
                                    expect={"slots": {"count": 2}}), "-m", "slots")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([
        "this answers like a llama.cpp server (/v1/models owned_by 'llamacpp'); fleet.yaml says "
        "engine: vllm, so the diagnosis below assumes the wrong engine: set engine: llamacpp first",
        "the endpoint does not report its slot count*"])


def test_the_right_engine_gets_no_such_line(two_slots, run_fleet):
    result = run_fleet(one_endpoint(two_slots.url, "llamacpp", alias="frank-a",
                                    expect={"slots": {"count": 4}}), "-m", "slots")
    result.assert_outcomes(failed=1)
    assert "this answers like" not in result.stdout.str()


def test_slot_advice_keeps_each_slots_context(two_slots, run_fleet):
    result = run_fleet(one_endpoint(two_slots.url, alias="frank-a", expect={
        "slots": {"count": 4, "ctx_per_slot": 4096}}), "-m", "slots")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([
        "2 slot(s) are served, 4 intended*",
        "  fix: --parallel 4 --ctx-size 16384 (each of the 4 slots keeps 4096 tokens; or "
        "--parallel 4 --kv-unified)"])


def test_alias_advice_keeps_the_names_served(two_slots, run_fleet):
    result = run_fleet(one_endpoint(two_slots.url, alias="frank-c"), "-m", "alias")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["  fix: add it to --alias, keeping the names served now: "
                                 "--alias frank-a,frank-b,frank-c"])


def test_a_launched_endpoint_is_advised_in_fleet_keys(run_fleet):
    pytest.importorskip("xllamacpp")
    fleet = {"endpoints": {"ep": {"engine": "llamacpp", "alias": "frank-a", "ready_timeout": 30,
                                  "launch": {"model": "selftest", "alias": "frank-a",
                                             "ctx_size": 8192, "parallel": 2},
                                  "expect": {"slots": {"count": 4, "ctx_per_slot": 4096}}}}}
    result = run_fleet(fleet, "-m", "slots")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([
        "  fix: launch.parallel: 4 launch.ctx_size: 16384 (each of the 4 slots keeps 4096 "
        "tokens; or launch.parallel: 4 launch.kv_unified: true)"])


def test_a_missing_key_names_api_key(llama, run_fleet):
    keyed = llama(alias="frank-k", api_key="sk-test-key-123")
    result = run_fleet(one_endpoint(keyed.url, alias="frank-k"), "-m", "alias")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*/v1/models answered 401: Invalid API Key",
                                 "  fix: the server wants a key: set `api_key` for this endpoint "
                                 "in fleet.yaml*"])


def test_a_plain_web_server_is_named_as_the_wrong_url(run_fleet):
    page = "<!DOCTYPE HTML><html><body>Not Found</body></html>"
    with Emulator("vllm") as em:
        em.route("GET", "/health", lambda r: Reply(404, page, {"content-type": "text/html"}))
        result = run_fleet(one_endpoint(em.url, "vllm", alias="m"), "-m", "health")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*/health: answered 404: <!DOCTYPE HTML>*",
                                 "  fix: nothing of the engine's answers on that path: check `url` "
                                 "in fleet.yaml (host, port, and whether a proxy expects a path "
                                 "before /v1) and `engine`"])


def test_loading_is_waited_for_as_long_as_configured(run_fleet):
    with Emulator("llamacpp", models=["m"], loading_for=60) as em:
        result = run_fleet(one_endpoint(em.url, alias="m", ready_timeout=3), "-m", "health")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*is still loading after 3s (ready_timeout 3s)*"])


def test_a_launch_that_fails_quotes_llamacpps_reason(run_fleet):
    pytest.importorskip("xllamacpp")
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        fleet = {"endpoints": {"ep": {"engine": "llamacpp", "ready_timeout": 5,
                                      "launch": {"model": "selftest", "port": port}}}}
        result = run_fleet(fleet, "-m", "health")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([f"*the local server could not be launched: llama.cpp did not "
                                 f"start for model * on 127.0.0.1:{port}: *couldn't bind HTTP "
                                 f"server socket*"])


def test_vram_with_nothing_measured_is_a_skip_with_the_reason(run_fleet):
    with Emulator("vllm", models=["m"]) as em:
        result = run_fleet(one_endpoint(em.url, "vllm", alias="m", expect={"vram": True}),
                           "-m", "vram", "-rs")
    result.assert_outcomes(skipped=2)
    result.stdout.fnmatch_lines(["*ep  vram inconclusive*"])
    assert "vram ok" not in result.stdout.str()


def test_the_offline_gate_reads_a_launch_block(run_fleet, pytester):
    fleet = {"endpoints": {"ep": {"engine": "llamacpp",
                                  "launch": {"model": "selftest", "ctx_size": 65536},
                                  "expect": {"vram": {"gpu_mib": 1024, "fixed_mib": 64}}}}}
    # A note on the row (in every report), not a Python warning that `-W error` would raise.
    result = run_fleet(fleet, "--frank-offline", "-m", "vram", "--frank-report=gate.md")
    result.assert_outcomes(passed=1)
    assert ("ctx 65536 (64K) gives each sequence 65536 tokens, more than the 8192 the model was "
            "trained on") in (pytester.path / "gate.md").read_text()


# -- measurements that own their data: requests given up on, a saturated server, spec_decode
# beside other traffic. Real llama.cpp: the self-test model that never stops talking.

CHATTY = {"model": "selftest:chatty", "alias": "m", "ctx_size": 8192, "parallel": 1,
          "metrics": True}


def _target(url, **keys):
    from pytest_frank.fleet import Endpoint
    from pytest_frank.target import Target

    return Target(Endpoint("ep", "llamacpp", url=url, alias="m", timeout=1,
                           min_tokens_per_s=100000, **keys))


def _busy_slots(url) -> list[bool]:
    import httpx

    return [s["is_processing"] for s in httpx.get(f"{url}/slots", timeout=10).json()]


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
def test_a_generation_given_up_on_leaves_its_slot_idle(llama, stream):
    """A 7000-token answer cut after a second: the plugin closes the connection and sends
    nothing for llama.cpp's abandon_quiet_s (a non-streamed request's connection is checked
    only when its wait for a result has been left a second alone), so the server drops it:
    the next reading of /slots finds the slot idle, and the late answer reads as slow, never as
    a saturated server (the busy slot was its own)."""
    import time

    from pytest_frank.chat import Request

    server = llama(**CHATTY)
    target = _target(server.url)
    try:
        reply = target.chat(Request("Say hello.", 7000, stream=stream))
        cut = reply.exchange.started + reply.exchange.elapsed  # when the plugin gave up
        assert reply.exchange.late and not reply.ok, reply.error
        assert "saturated" not in reply.error, reply.error
        slots = target.get("/slots")  # waits out the quiet the cut left
        idle_after = time.monotonic() - cut
    finally:
        target.close()
    assert [s["is_processing"] for s in slots.json()] == [False], slots.body[:300]
    assert idle_after < 4, idle_after
    print(f"idle {idle_after:.2f}s after the cut ({'streamed' if stream else 'whole'})")


class _Busy:
    """Streams of the test's own that keep every slot of a server busy (two, so one waits for
    the slot when the other ends), closed on exit."""

    def __init__(self, url, streams=2):
        import threading

        self.url, self.done = url, threading.Event()
        self.threads = [threading.Thread(target=self._talk, daemon=True) for _ in range(streams)]

    def _talk(self):
        import httpx

        body = {"model": "m", "messages": [{"role": "user", "content": "Talk."}],
                "max_tokens": 8000, "stream": True}
        while not self.done.is_set():
            with httpx.stream("POST", f"{self.url}/v1/chat/completions", json=body,
                              timeout=60) as answer:
                for _ in answer.iter_lines():
                    if self.done.is_set():
                        break

    def __enter__(self):
        import time

        for thread in self.threads:
            thread.start()
        end = time.monotonic() + 20
        while not all(_busy_slots(self.url)) and time.monotonic() < end:
            time.sleep(0.2)
        return self

    def __exit__(self, *exc):
        self.done.set()
        for thread in self.threads:
            thread.join(30)


def test_a_saturated_server_reads_slow_not_hung(llama, run_fleet):
    """Every slot busy with the test's own streams: the battery's first answer runs past its
    time, and the diagnosis reads the server's load (/slots, llamacpp:requests_deferred)
    instead of calling it hung; the fix is a quieter time, not a restart."""
    server = llama(**CHATTY)
    with _Busy(server.url):
        result = run_fleet(one_endpoint(server.url, alias="m", timeout=1, min_tokens_per_s=1000,
                                        expect={"reasoning": True}), "-m", "reasoning")
    out = result.stdout.str()
    result.assert_outcomes(failed=1, skipped=2)
    result.stdout.fnmatch_lines([
        "chat: no answer within *s: the server is saturated (1 of 1 slots busy, * waiting): "
        "slow, not hung",
        "  fix: the server is busy, not broken: run the battery at a quieter time (or give the "
        "server more slots); restarting it would only drop the requests in flight"])
    assert "hangs" not in out, out[-3000:]  # the evidence's own line says the same
    result.stdout.fnmatch_lines(["*ep answered too slowly, see test_reasoning[[]ep[]]: POST "
                                 "/v1/chat/completions: no answer within *s: the server is "
                                 "saturated*"])


SELF_DRAFTING = {"model": "selftest:chatty", "alias": "m", "draft_model": "selftest:chatty",
                 "parallel": 2, "metrics": True}
JSON_ONLY = {"type": "json_schema", "json_schema": {"name": "city", "strict": True, "schema": {
    "type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}


class _Others:
    """Another client of the same server: grammar-bound answers (a JSON schema, as a tool call
    is bound) one after another, where the draft, which knows no grammar, is mostly refused."""

    def __init__(self, url):
        import threading

        self.url, self.done = url, threading.Event()
        self.thread = threading.Thread(target=self._ask, daemon=True)

    def _ask(self):
        import httpx

        body = {"model": "m", "messages": [{"role": "user", "content": "A city, as JSON."}],
                "max_tokens": 256, "response_format": JSON_ONLY}
        while not self.done.is_set():
            try:
                httpx.post(f"{self.url}/v1/chat/completions", json=body, timeout=120)
            except httpx.HTTPError:  # a slow answer on a loaded box: ask again
                pass

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.done.set()
        self.thread.join(60)


def test_spec_decode_beside_tools_on_a_self_drafting_endpoint_never_fails(llama, run_fleet,
                                                                          tmp_path):
    """Ten runs of spec_decode beside the tool checks (grammar-bound, two at once) on one
    self-drafting llama.cpp; in every other run another client's grammar-bound answers share
    the server too. spec_decode runs first and alone, and judges the counters against its own
    replies' drafting: it passes, or is inconclusive naming both counts, never a failure."""
    import contextlib
    import json

    server = llama(**SELF_DRAFTING)
    fleet = one_endpoint(server.url, alias="m", concurrency=2, expect={
        "spec_decode": {"min_acceptance": 0.5}, "tools": {"trials": 1}})
    seen = []
    for run in range(10):
        report = tmp_path / f"run{run}.json"
        shared = run % 2 == 1
        with _Others(server.url) if shared else contextlib.nullcontext():
            run_fleet(fleet, "-m", "spec_decode or tools", "--frank-json", str(report))
        row = next(r for r in json.loads(report.read_text())["rows"]
                   if r["key"].endswith("test_spec_decode[ep]"))
        mixed = next((n for n in row["notes"] if n.startswith("the counters saw")), "")
        seen.append((shared, row["verdict"], (row["figures"].get("acceptance") or {}).get("value"),
                     row["line"] or mixed))
    for shared, verdict, acceptance, line in seen:
        print(f"{'shared' if shared else 'alone '} {verdict:12} {acceptance} {line[:300]}")
    assert all(verdict in ("pass", "inconclusive") for _, verdict, _, _ in seen), seen
    assert all(verdict == "pass" for shared, verdict, _, _ in seen if not shared), seen


class _Unsized:
    """What sizing reads of an endpoint whose engine cannot count tokens (no /tokenize)."""

    def __init__(self, ctx):
        from pytest_frank.drivers import driver_for

        self.ctx, self.driver = ctx, driver_for("sglang")

    def served_context(self):
        return self.ctx

    def model_name(self):
        return "m"


@pytest.mark.unit
@pytest.mark.parametrize("ctx, words, sent, note", [
    (None, 1500, 1500, ""),  # no slot size reported: the prompt as asked
    (32768, 1500, 1500, ""),  # 1500 six-character words fit half of 32768 at a token a character
    (4096, 1500, 324, "1500 words are 9000 tokens by an estimate of 1 token a character, more "
                      "than the 2048 a 4096-token slot leaves a long prompt: 324 words (1944 "
                      "tokens) sent"),
])
def test_without_a_tokenizer_route_a_long_prompt_is_sized_at_a_token_a_character(
        ctx, words, sent, note):
    from pytest_frank import sizing

    fitted = sizing.fit(_Unsized(ctx), lambda n: "abcde " * n, words, 80, 256)
    assert (fitted.words, fitted.note, fitted.too_small) == (sent, note, None)


@pytest.mark.unit
def test_a_slot_without_room_for_the_least_prompt_names_its_size():
    from pytest_frank import sizing

    fitted = sizing.fit(_Unsized(300), lambda n: "abcde " * n, 1500, 80, 256)
    assert fitted.too_small == ("each slot holds 300 tokens: room for 150 prompt tokens, fewer "
                                "than the 256 a measurement needs")
