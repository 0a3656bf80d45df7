"""Diagnoses an ops engineer can act on: the engine fleet.yaml names is wrong, a key is missing,
the URL points at another server, the slot advice keeps each slot's context, the alias advice
keeps the names served, a launched endpoint's advice names fleet.yaml keys, a loading server is
waited for as long as configured; and each message true for the engine at hand: SGLang's drift
read from what SGLang reports, llama.cpp's default reasoning format, the training context that
caps llama.cpp's slots, MTP advice only with an MTP head, and no fix asking for a setting already
in effect. Real llama.cpp where it shows the fault, the emulator else."""

import pytest

from emulator import Emulator, Reply
from fleets import one_endpoint
from pytest_frank.claims import bind
from pytest_frank.outcome.verdict import Alt, Phrase

pytestmark = pytest.mark.real
# test_slots alone: the slot shape's diagnoses (the context a slot takes is
# tests/claims/perf/test_slots_context_real.py's, and the training cap's below)
SHAPE = ("-m", "slots", "-k", "not test_slots_context")


@pytest.fixture(scope="module")
def two_slots(llama):
    return llama(alias=["frank-a", "frank-b"], ctx_size=8192, parallel=2, metrics=True)


def test_a_llamacpp_called_vllm_says_so_first(two_slots, run_fleet):
    result = run_fleet(one_endpoint(two_slots.url, "vllm", alias="frank-a",
                                    expect={"slots": {"count": 2}}), *SHAPE)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([
        "this answers like a llama.cpp server (/v1/models owned_by 'llamacpp'); fleet.yaml says "
        "engine: vllm, so the diagnosis below assumes the wrong engine: set engine: llamacpp first",
        "the endpoint does not report its slot count*"])


def test_the_right_engine_gets_no_such_line(two_slots, run_fleet):
    result = run_fleet(one_endpoint(two_slots.url, "llamacpp", alias="frank-a",
                                    expect={"slots": {"count": 4}}), *SHAPE)
    result.assert_outcomes(failed=1)
    assert "this answers like" not in result.stdout.str()


def test_slot_advice_keeps_each_slots_context(two_slots, run_fleet):
    result = run_fleet(one_endpoint(two_slots.url, alias="frank-a", expect={
        "slots": {"count": 4, "ctx_per_slot": 4096}}), *SHAPE)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([
        "2 slot(s) are served, 4 intended*",
        "  fix: --parallel 4 --ctx-size 16384 (each of the 4 slots keeps 4096 tokens; or "
        "--parallel 4 --kv-unified)"])


def test_alias_advice_keeps_the_names_served(two_slots, run_fleet):
    result = run_fleet(one_endpoint(two_slots.url, alias="frank-c"), "-m", "alias")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["  fix: start llama-server with --alias frank-a,frank-b,frank-c "
                                 "(the names served now kept beside it)"])


def test_a_launched_endpoint_is_advised_in_fleet_keys(run_fleet):
    pytest.importorskip("xllamacpp")
    fleet = {"endpoints": {"ep": {"engine": "llamacpp", "alias": "frank-a", "ready_timeout": 30,
                                  "launch": {"model": "selftest", "alias": "frank-a",
                                             "ctx_size": 8192, "parallel": 2},
                                  "expect": {"slots": {"count": 4, "ctx_per_slot": 4096}}}}}
    result = run_fleet(fleet, *SHAPE)
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


def test_the_offline_gate_needs_no_secret(run_fleet, monkeypatch):
    """A pull request from a fork gets no secrets: --frank-offline sends nothing, so a key or a
    header from an unset ${VAR} is left as written; a live run still refuses it."""
    from pytest_frank.local.selftest_model import model_path

    monkeypatch.delenv("TEAM_KEY", raising=False)
    vram = {"model": str(model_path()), "ctx_size": 4096, "gpu_mib": 1024, "fixed_mib": 64}
    fleet = {"endpoints": {"ep": {"url": "http://127.0.0.1:9/v1", "engine": "llamacpp",
                                  "api_key": "${TEAM_KEY}",
                                  "headers": {"X-Proxy-Token": "${TEAM_KEY}"},
                                  "expect": {"vram": vram}}}}
    run_fleet(fleet, "--frank-offline", "-m", "vram").assert_outcomes(passed=1)
    live = run_fleet(fleet, "-m", "vram")
    assert live.ret == pytest.ExitCode.USAGE_ERROR
    live.stderr.fnmatch_lines(["*endpoints.ep.api_key: environment variable TEAM_KEY is not set*"])


# -- engine facts: SGLang names its model card after the served name ----------------------------
# SGLang's shapes (the emulator): /v1/models is ModelCard(id=served_model_name,
# root=served_model_name, max_model_len=context_len); /get_server_info is the server's arguments,
# model_path among them.
SGLANG_COMMAND = ("python -m sglang.launch_server --model-path Qwen/Qwen3-8B "
                  "--served-model-name frank --context-length 32768 --port {port}")


def sglang_info(model_path: str) -> dict:
    return {"model_path": model_path, "served_model_name": "frank", "context_length": 32768,
            "max_running_requests": 48, "version": "0.5.4"}


@pytest.mark.parametrize("running, outcome, lines", [
    ("Qwen/Qwen3-8B", {"passed": 2}, []),
    ("Qwen/Qwen3-14B", {"passed": 1, "failed": 1}, [
        "serve.command:1: the serve command asks model Qwen/Qwen3-8B, the server runs "
        "Qwen/Qwen3-14B: the service was not restarted since the edit",
        "  fix: restart the server with the current command"]),
], ids=["served-name-is-no-drift", "another-model-path-is-drift"])
def test_sglang_drift_reads_the_server_info(run_fleet, running, outcome, lines):
    with Emulator("sglang", models=["frank"]) as em:
        em.route("GET", "/get_server_info", lambda r: Reply(200, sglang_info(running)))
        port = em.url.rsplit(":", 1)[1]
        fleet = one_endpoint(em.url, "sglang", alias="frank",
                             serve={"command": SGLANG_COMMAND.format(port=port)})
        result = run_fleet(fleet, "-m", "serve")
    result.assert_outcomes(**outcome)
    result.stdout.fnmatch_lines(lines)
    assert "the server runs frank" not in result.stdout.str()


# -- engine facts: llama.cpp splits reasoning out by default ------------------------------------
def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_llamacpp_without_reasoning_format_passes_reasoning_and_the_gate(run_fleet, pytester):
    """llama-server's default reasoning format is deepseek (common/common.h): a command without
    --reasoning-format serves reasoning_content, so the gate notes the unpinned default and
    does not fail it."""
    pytest.importorskip("xllamacpp")
    from pytest_frank.local.selftest_model import model_path

    port = free_port()
    command = (f"llama-server -m {model_path('default')} --alias frank-r --ctx-size 4096 "
               f"--parallel 1 --jinja --port {port}")
    fleet = {"endpoints": {"ep": {"engine": "llamacpp", "alias": "frank-r", "ready_timeout": 30,
                                  "launch": {"model": "selftest", "alias": "frank-r",
                                             "port": port},
                                  "serve": {"command": command},
                                  "expect": {"reasoning": True}}}}
    result = run_fleet(fleet, "-m", "reasoning or serve", "--frank-report=r.md")
    result.assert_outcomes(passed=5)  # reasoning plain, streamed and off; serve config, drift
    report = (pytester.path / "r.md").read_text()
    assert "leaves --reasoning-format at the default: llama-server splits the thinking" in report
    assert "has no --reasoning-format" not in result.stdout.str() + report


# -- fixes that read the facts: the training context caps llama.cpp's slots ----------------------
# A real llama.cpp on a self-test model trained at 4096 tokens: every slot is capped there
# (its log: "the slot context (8192) exceeds the training context of the model (4096) -
# capping"), whatever --ctx-size, --parallel or --kv-unified say.
# test_slots_context's prompt at 0.9 of the 8192 claimed, refused for real at the cap
REFUSED = ("*a prompt of 7??? tokens by the server's /tokenize (0.9 of the 8192-token slot "
           "context of expect.slots.ctx_per_slot) was refused: the slot holds 4096 tokens, the "
           "model's training context, and llama.cpp caps every slot at the model's training "
           "context (400: request (7??? tokens) exceeds the available context size (4096 "
           "tokens)*")
TRAIN_CAP = [  # (id, launch settings, expect.slots, outcome of both tests, lines, never)
    ("unified-2-slots", {"ctx_size": 8192, "parallel": 2, "kv_unified": True},
     {"count": 2, "ctx_per_slot": 8192}, "failed",
     ["*each slot gets 4096 tokens of context, 8192 intended: the model was trained on 4096 "
      "and llama.cpp caps every slot at the model's training context*",
      "  fix: serve a model trained on at least 8192 tokens, or set expect.slots.ctx_per_slot "
      "to 4096 (what this model holds)", REFUSED,
      "  fix: stretch the model with YaRN: --rope-scaling yarn --rope-scale 2 (newer llama.cpp "
      "builds raise the training context with it; older ones also need --override-kv "
      "<arch>.context_length=int:8192); or serve a model trained on 8192 tokens, or claim "
      "expect.slots.ctx_per_slot 4096"],
     ["kv_unified", "divides the context"]),
    ("one-slot", {"ctx_size": 8192, "parallel": 1}, {"count": 1, "ctx_per_slot": 8192},
     "failed", ["*the model was trained on 4096 and llama.cpp caps every slot*", REFUSED],
     ["set the context size", "kv_unified"]),
    ("within-the-cap", {"ctx_size": 8192, "parallel": 2, "kv_unified": True},
     {"count": 2, "ctx_per_slot": 4096}, "passed", [], []),
]


@pytest.fixture(scope="module")
def trained_4096(tmp_path_factory):
    from pytest_frank.local.selftest_model import write_model

    return str(write_model(tmp_path_factory.mktemp("cap") / "trained-4096.gguf", ctx_train=4096))


@pytest.mark.parametrize("launch, slots, outcome, lines, never", [c[1:] for c in TRAIN_CAP],
                         ids=[c[0] for c in TRAIN_CAP])
def test_the_training_context_caps_the_slots(run_fleet, trained_4096, launch, slots, outcome,
                                             lines, never):
    pytest.importorskip("xllamacpp")
    fleet = {"endpoints": {"ep": {"engine": "llamacpp", "ready_timeout": 30,
                                  "launch": {"model": trained_4096, **launch},
                                  "expect": {"slots": slots}}}}
    result = run_fleet(fleet, "-m", "slots")
    result.assert_outcomes(**{outcome: 2})
    result.stdout.fnmatch_lines(lines)
    for text in never:
        assert text not in result.stdout.str()


# -- fixes that read the facts: the MTP advice only with an MTP head ----------------------------
# The offline gate on real GGUF headers: the self-test model (no MTP head) and sparse files the
# tests write with and without nextn_predict_layers.
MTP_ADVICE = "use --spec-type draft-mtp alone"
DRAFTS = [  # (id, model, draft, the finding holds, never in it)
    ("self-drafting-no-head", "selftest", "selftest",
     "is the served model itself, with no MTP head (nextn_predict_layers 0)", MTP_ADVICE),
    ("self-drafting-with-head", "mtp", "mtp",
     "is the served model itself, a whole model carrying an MTP head (4 layers + 1 NextN)", None),
    ("whole-mtp-model-as-draft", "selftest", "mtp",
     "is a whole model carrying an MTP head", None),
    ("unreadable-mtp-name", "selftest", "/gone/Big-mtp.gguf", "is an -mtp model file", None),
    ("unreadable-itself", "/gone/Big.gguf", "/gone/Big.gguf", "is the served model itself",
     None),
    ("small-draft-no-head", "mtp", "small", None, None),
]


@pytest.fixture(scope="module")
def draft_files(tmp_path_factory):
    import gguf_files as gf

    from pytest_frank.local.selftest_model import model_path

    d = tmp_path_factory.mktemp("drafts")

    def model(name, nextn, blocks):
        kv = {"{arch}.block_count": blocks, "{arch}.embedding_length": 64,
              "{arch}.attention.head_count": 4, "{arch}.attention.head_count_kv": 1}
        if nextn:
            kv["{arch}.nextn_predict_layers"] = nextn
        return str(gf.write_gguf(d / name, "qwen3", kv,
                                 [("token_embd.weight", (64, 32), gf.Q.F16)]))

    return {"selftest": str(model_path("default")), "mtp": model("Q-mtp.gguf", 1, 5),
            "small": model("Q-0.6B.gguf", 0, 2)}


@pytest.mark.parametrize("model, draft, holds, never", [c[1:] for c in DRAFTS],
                         ids=[c[0] for c in DRAFTS])
def test_mtp_advice_only_with_an_mtp_head(draft_files, model, draft, holds, never):
    from pytest_frank.drivers import driver_for
    from pytest_frank.fleet import Endpoint
    from pytest_frank.serve import findings, read

    model, draft = draft_files.get(model, model), draft_files.get(draft, draft)
    line = f"llama-server -m {model} -md {draft} --spec-type draft-simple --metrics"
    ep = bind(Endpoint("frank", "llamacpp", url="http://127.0.0.1:8080",
                       expect={"spec_decode": True}))
    found = [f for f in findings(read({"command": line}), ep, driver_for("llamacpp"))
             if f.what.startswith("--model-draft")]
    if holds is None:
        assert found == []
        return
    (finding,) = found
    assert holds in finding.what and finding.severity == "fail"
    if never:
        assert never not in finding.fix
        assert "small draft model of the same family" in finding.fix
    else:
        assert MTP_ADVICE in finding.fix


# -- every fix names only what is not already in effect -------------------------------------------
def _fixes():
    from pytest_frank.claims.slots import slots_fix, unify_hint
    from pytest_frank.claims.spec_decode import metrics_fix
    from pytest_frank.drivers import driver_for

    llama = driver_for("llamacpp")
    return {"slots": slots_fix(llama, 4, 4096), "metrics": metrics_fix(llama),
            "unify": Phrase(Alt(unify_hint(llama), ", or "), "multiply the context size by 2"),
            "plain": "a fix in plain words"}


IN_EFFECT = [  # (id, fix, settings in effect, the fix as given; None: dropped)
    ("nothing-set", "slots", {}, "--parallel 4 --ctx-size 16384 (each of the 4 slots keeps 4096 "
     "tokens; or --parallel 4 --kv-unified)"),
    ("unified-needs-only-the-count", "slots", {"--kv-unified": None}, "--parallel 4"),
    ("total-already-set", "slots", {"--ctx-size": "16384"}, "--parallel 4"),
    ("another-value-is-no-match", "slots", {"--parallel": "2"},
     "--parallel 4 --ctx-size 16384 (each of the 4 slots keeps 4096 tokens; or --parallel 4 "
     "--kv-unified)"),
    ("asked-value-already-set", "slots", {"--parallel": "4"}, None),
    ("switch-already-on", "metrics", {"--metrics": None}, None),
    ("unified-leaves-the-other-way", "unify", {"--kv-unified": None},
     "multiply the context size by 2"),
    ("a-mention-asks-nothing", "unify", {"--ctx-size": "4096"},
     "add --kv-unified (every slot then sees the whole --ctx-size), or multiply the context "
     "size by 2"),
    ("plain-text-stays", "plain", {"--kv-unified": None}, "a fix in plain words"),
]


@pytest.mark.parametrize("fix, settings, given", [c[1:] for c in IN_EFFECT],
                         ids=[c[0] for c in IN_EFFECT])
def test_a_fix_never_asks_for_what_is_in_effect(fix, settings, given):
    from pytest_frank.outcome.verdict import render, unsettled

    kept = unsettled(_fixes()[fix], settings)
    assert (None if kept is None else render(kept)) == given


def test_launch_and_serve_settings_are_in_effect():
    from pytest_frank.drivers import driver_for
    from pytest_frank.serve import read
    from pytest_frank.serve.flags import parse

    llama = driver_for("llamacpp")
    assert llama.launch.settings_in_effect({"model": "selftest", "kv_unified": True, "parallel": 2}) \
        == {"--ctx-size": "4096", "--parallel": "2", "--kv-unified": None, "--metrics": None,
            "--jinja": None}
    command = read({"command": "llama-server -m /m.gguf -kvu -np 2 --no-jinja"})
    found = llama.launch.settings_in_effect(None, parse(command, llama.launch.serve_flags))
    assert found["--kv-unified"] is None and found["-kvu"] is None
    assert found["--parallel"] == "2" and "--jinja" not in found


def test_a_unified_launch_is_not_advised_to_unify(llama, run_fleet):
    """Real llama.cpp: 2 unified slots, 4 wanted: every slot sees the whole context, so the
    slot count is the whole fix (no larger context, no --kv-unified)."""
    fleet = {"endpoints": {"ep": {"engine": "llamacpp", "ready_timeout": 30,
                                  "launch": {"model": "selftest", "ctx_size": 4096, "parallel": 2,
                                             "kv_unified": True},
                                  "expect": {"slots": {"count": 4, "ctx_per_slot": 4096}}}}}
    pytest.importorskip("xllamacpp")
    result = run_fleet(fleet, *SHAPE)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*2 slot(s) are served, 4 intended*",
                                 "  fix: launch.parallel: 4"])
    assert "kv_unified" not in result.stdout.str()


@pytest.mark.parametrize("line, fix", [
    ("-c 8192 -np 2", "the context is divided among the slots: --ctx-size 16384, or unify the "
     "KV cache"),
    ("-c 4096 -np 2 --kv-unified", "--ctx-size 8192 (each slot sees the whole context)"),
    ("-c 4096 -np 1", "--ctx-size 8192 (each slot sees the whole context)"),
], ids=["split", "unified", "one-slot"])
def test_the_gates_slot_fix_reads_the_command(line, fix):
    from pytest_frank.drivers import driver_for
    from pytest_frank.fleet import Endpoint
    from pytest_frank.serve import findings, read

    ep = bind(Endpoint("frank", "llamacpp", url="http://127.0.0.1:8080",
                       expect={"slots": {"ctx_per_slot": 8192}}))
    found = findings(read({"command": f"llama-server -m /m.gguf {line}"}), ep,
                     driver_for("llamacpp"))
    (slot,) = [f for f in found if "ctx_per_slot" in f.what]
    assert slot.fix == fix


# -- measurements that own their data: requests given up on, a saturated server, spec_decode
# beside other traffic. Real llama.cpp: the self-test model that never stops talking.

CHATTY = {"model": "selftest:chatty", "alias": "m", "ctx_size": 8192, "parallel": 1,
          "metrics": True}


def _target(url, **keys):
    from pytest_frank.fleet import Endpoint
    from pytest_frank.runtime.target import Target

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

    from pytest_frank.runtime.chat import Request, send

    server = llama(**CHATTY)
    target = _target(server.url)
    try:
        reply = send(target, Request("Say hello.", 7000, stream=stream))
        cut = reply.exchange.started + reply.exchange.elapsed  # when the plugin gave up
        assert reply.exchange.late and not reply.ok, reply.problem
        assert "saturated" not in reply.problem, reply.problem
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
        "chat: no answer within *s (timeout 1 s + 512 tokens at min_tokens_per_s 1000 tok/s): "
        "the server is saturated (1 of 1 slots busy, * waiting): slow, not hung",
        "  fix: the server is busy, not broken: run the battery at a quieter time (or give the "
        "server more slots); restarting it would only drop the requests in flight"])
    assert "hangs" not in out, out[-3000:]  # the evidence's own line says the same
    result.stdout.fnmatch_lines(["*ep answered too slowly, see test_reasoning[[]ep[]]: POST "
                                 "/v1/chat/completions: no answer within *s (*): the server "
                                 "is saturated*"])


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
    """Four runs of spec_decode beside the tool checks (grammar-bound, two at once) on one
    self-drafting llama.cpp; in every other run another client's grammar-bound answers share
    the server too. spec_decode runs first and alone, and judges the counters against its own
    replies' drafting: it passes, or is inconclusive naming both counts, never a failure.
    Four runs, two of each kind, keep the suite's time (each run is the tools battery, about
    14 s of CPU); bench/false_failures.py repeats the whole battery on drafting endpoints."""
    import contextlib
    import json

    server = llama(**SELF_DRAFTING)
    fleet = one_endpoint(server.url, alias="m", concurrency=2, expect={
        "spec_decode": {"min_acceptance": 0.5}, "tools": {"trials": 1}})
    seen = []
    for run in range(4):
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


@pytest.mark.parametrize("ctx, words, sent, note", [
    (None, 1500, 1500, ""),  # no slot size reported: the prompt as asked
    (32768, 1500, 1500, ""),  # 1500 six-character words fit half of 32768 at a token a character
    (4096, 1500, 324, "1500 words are 9000 tokens by an estimate of 1 token a character, more "
                      "than the 2048 a 4096-token slot leaves a long prompt: 324 words (1944 "
                      "tokens) sent"),
])
def test_without_a_tokenizer_route_a_long_prompt_is_sized_at_a_token_a_character(
        ctx, words, sent, note):
    from pytest_frank.runtime import sizing

    fitted = sizing.fit(_Unsized(ctx), lambda n: "abcde " * n, words, 80, 256)
    assert (fitted.words, fitted.note, fitted.too_small) == (sent, note, None)


def test_a_slot_without_room_for_the_least_prompt_names_its_size():
    from pytest_frank.runtime import sizing

    fitted = sizing.fit(_Unsized(300), lambda n: "abcde " * n, 1500, 80, 256)
    assert fitted.too_small == ("each slot holds 300 tokens: room for 150 prompt tokens, fewer "
                                "than the 256 a measurement needs")
