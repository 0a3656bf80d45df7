"""serve.findings: each fault the seeds list, as a config that has it and the finding it yields,
against a healthy config that yields none. GGUF headers are written by the tests (sparse files),
so no engine is needed: this is the offline gate."""

from __future__ import annotations

import gguf_files as gf
import pytest

from checkout import ROOT
from pytest_frank.claims import bind, declared
from pytest_frank.drivers import driver_for
from pytest_frank.fleet import Endpoint
from pytest_frank.serve import findings, read

pytestmark = pytest.mark.emulated

LLAMA_EXPECT = {"tools": True, "reasoning": True, "spec_decode": True, "vision": True,
                "slots": {"count": 1, "ctx_per_slot": 131072}}


def model(path, nextn: int = 0, blocks: int = 4):
    kv = {"{arch}.block_count": blocks, "{arch}.embedding_length": 64,
          "{arch}.attention.head_count": 4, "{arch}.attention.head_count_kv": 1}
    if nextn:
        kv["{arch}.nextn_predict_layers"] = nextn
    return gf.write_gguf(path, "qwen3", kv, [("token_embd.weight", (64, 32), gf.Q.F16)])


@pytest.fixture(scope="module")
def box(tmp_path_factory):
    d = tmp_path_factory.mktemp("serve")
    files = {"mtp": model(d / "Q-mtp.gguf", nextn=1, blocks=5), "plain": model(d / "Q.gguf"),
             "head": model(d / "Q-head.gguf", nextn=1, blocks=1),
             "mmproj": gf.write_gguf(d / "mmproj.gguf", "clip", {"clip.has_vision_encoder": True}),
             "tpl": d / "template.jinja", "bin": d / "build" / "bin" / "llama-server"}
    files["tpl"].write_text("{{ messages }}")
    files["bin"].parent.mkdir(parents=True)
    return {"dir": str(d), **{k: str(v) for k, v in files.items()}}


def llama_line(box) -> str:
    return (f"{box['bin']} -m {box['mtp']} --mmproj {box['mmproj']} --alias frank "
            f"--host 0.0.0.0 --port 7770 -c 131072 -np 1 --jinja --reasoning-format deepseek "
            f"--metrics --spec-type draft-mtp --chat-template-file {box['tpl']}")


def endpoint(engine="llamacpp", url="http://10.0.0.5:7770/v1", **expect) -> Endpoint:
    return bind(Endpoint("frank", engine, url=url, alias="frank", expect=expect))


def run(line: str, ep: Endpoint):
    return findings(read({"command": line}), ep, driver_for(ep.engine))


def test_healthy_llamacpp_config_has_no_findings(box):
    assert run(llama_line(box), endpoint(**LLAMA_EXPECT)) == []


LLAMA_FAULTS = [  # (id, edit of the healthy line, text the finding must hold)
    ("tools-no-jinja", ("--jinja ", ""), "tools is asked, but the serve command has no --jinja"),
    ("tools-jinja-off", ("--jinja", "--no-jinja"), "turns it off --jinja"),
    ("reasoning-none", ("--reasoning-format deepseek", "--reasoning-format none"),
     "reasoning is asked, but --reasoning-format is none"),
    ("spec-no-metrics", ("--metrics ", ""), "spec_decode is asked, but the serve command has "
     "no --metrics"),
    ("spec-no-spec-type", ("--spec-type draft-mtp ", ""), "has no --spec-type"),
    ("vision-no-mmproj", ("--mmproj {mmproj} ", ""), "vision is asked, but the serve command "
     "has no --mmproj"),
    ("alias", ("--alias frank", "--alias other,big"), "fleet.yaml calls the model 'frank', but "
     "the serve command serves it as other, big"),
    ("port", ("--port 7770", "--port 8080"), "listens on port 8080, fleet.yaml reaches the "
     "endpoint on 7770"),
    ("loopback", ("--host 0.0.0.0", "--host 127.0.0.1"), "listens on 127.0.0.1 only, but "
     "fleet.yaml reaches it at 10.0.0.5"),
    ("model-missing", ("-m {mtp}", "-m {dir}/Q-typo.gguf"), "Q-typo.gguf: no such file"),
    ("mmproj-not-gguf", ("--mmproj {mmproj}", "--mmproj {tpl}"), "is not a GGUF file"),
    ("template-missing", ("--chat-template-file {tpl}", "--chat-template-file {dir}/t.jinja"),
     "t.jinja: no such file"),
    ("draft-is-model", ("--spec-type", "-md {mtp} --spec-type"), "is the served model itself"),
    ("draft-whole-mtp", ("-m {mtp}", "-m {plain} --model-draft {mtp}"),
     "is a whole model carrying an MTP head (4 layers + 1 NextN)"),
    ("draft-named-mtp", ("--spec-type", "-md /gone/Other-mtp.gguf --spec-type"),
     "is an -mtp model file"),
    ("mtp-without-head", ("-m {mtp}", "-m {plain}"), "has no MTP head (nextn_predict_layers 0)"),
    ("slot-count", ("-np 1", "-np 2"), "expect.slots.count is 1, the serve command asks "
     "--parallel 2"),
    ("ctx-per-slot", ("-c 131072", "-c 65536"), "gives each slot 65536"),
]


@pytest.mark.parametrize("edit,expected", [f[1:] for f in LLAMA_FAULTS],
                         ids=[f[0] for f in LLAMA_FAULTS])
def test_each_llamacpp_fault_yields_its_finding(box, edit, expected):
    old, new = (part.format(**box) for part in edit)
    line = llama_line(box)
    assert old in line
    found = run(line.replace(old, new, 1), endpoint(**LLAMA_EXPECT))
    texts = [f.what for f in found]
    assert any(expected in t for t in texts), texts
    hit = next(f for f in found if expected in f.what)
    assert hit.where == "serve.command:1" and hit.fix and hit.severity == "fail"


def test_an_unpinned_reasoning_format_is_a_note(box):
    """llama-server splits reasoning out by default; only `none` keeps it in content."""
    line = llama_line(box).replace(" --reasoning-format deepseek", "")
    (found,) = run(line, endpoint(**LLAMA_EXPECT))
    assert found.severity == "note"
    assert "leaves --reasoning-format at the default" in found.what
    assert found.fix.startswith("pin it")


@pytest.mark.parametrize("spelling, use", [("--draft-max 4", "--spec-draft-n-max N"),
                                           ("--draft=4", "--spec-draft-n-max N"),
                                           ("--draft-min 1", "--spec-draft-n-min N")])
def test_a_removed_draft_spelling_is_a_note(box, spelling, use):
    """llama.cpp's arg_removed: a current llama-server exits on it; a fork may still take it."""
    (found,) = run(f"{llama_line(box)} {spelling}", endpoint(**LLAMA_EXPECT))
    assert found.severity == "note" and "the argument has been removed" in found.what
    assert found.fix == f"use {use}"


def test_findings_point_at_the_file_and_line_that_sets_the_value(box, tmp_path):
    env = tmp_path / "frank.env"
    env.write_text(f"MODEL={box['plain']}\nCTX=131072\nPORT=9999\n")
    unit = tmp_path / "frank.service"
    unit.write_text(f"[Service]\nEnvironmentFile={env}\nExecStart={box['bin']} -m ${{MODEL}} "
                    "\\\n  -c ${CTX} --port ${PORT} --jinja\n")
    found = findings(read({"unit": str(unit)}), endpoint(tools=True), driver_for("llamacpp"))
    assert [(f.where, f.fix) for f in found] == [
        (f"{unit}:3", "--alias frank"),
        (f"{env}:3", "--port 7770, or correct the url (a proxy in between must forward 7770 "
         "to 9999)"),
        (f"{unit}:3", "--host 0.0.0.0 (or the address fleet.yaml uses)")]


def test_quantized_kv_cache_and_the_fa_all_quants_build(box, tmp_path):
    line = llama_line(box) + " -ctk q8_0"
    cache = tmp_path / "build" / "CMakeCache.txt"
    (found,) = run(line, endpoint(**LLAMA_EXPECT))
    assert found.severity == "note" and "GGML_CUDA_FA_ALL_QUANTS=ON" in found.what
    assert "about 12x slower" in found.what and "-DGGML_CUDA_FA_ALL_QUANTS=ON" in found.fix
    binary = tmp_path / "build" / "bin" / "llama-server"
    binary.parent.mkdir(parents=True)
    built = line.replace(box["bin"], str(binary))
    cache.write_text("GGML_CUDA:BOOL=ON\nGGML_CUDA_FA_ALL_QUANTS:BOOL=OFF\n")
    (found,) = run(built, endpoint(**LLAMA_EXPECT))
    assert found.severity == "fail" and "build has GGML_CUDA_FA_ALL_QUANTS=OFF" in found.what
    cache.write_text("GGML_CUDA_FA_ALL_QUANTS:BOOL=ON\n")
    assert run(built, endpoint(**LLAMA_EXPECT)) == []
    assert run(line.replace(" -ctk q8_0", " -ctk f16 -ctv bf16"), endpoint(**LLAMA_EXPECT)) == []


def test_a_standalone_mtp_head_is_a_fine_draft(box):
    line = llama_line(box).replace(f"-m {box['mtp']}", f"-m {box['plain']}")
    line = line.replace("--spec-type draft-mtp", f"--spec-type draft-mtp -md {box['head']}")
    assert run(line, endpoint(**LLAMA_EXPECT)) == []


def test_the_wrong_engine_is_one_clear_finding(box):
    (found,) = run("vllm serve /m --port 7770", endpoint(**LLAMA_EXPECT))
    assert found.what == ("the serve command starts 'vllm', not a llama.cpp server "
                          "(llama-server)")


def seed_model(path):
    """The seeds' frank-default-large as a header: 16 attention layers x 4 KV heads x 256,
    14982 MiB of weights (sparse zeros)."""
    kv = {"{arch}.block_count": 64, "{arch}.context_length": 262144,
          "{arch}.embedding_length": 5120, "{arch}.attention.head_count": 24,
          "{arch}.attention.head_count_kv": 4, "{arch}.attention.key_length": 256,
          "{arch}.attention.value_length": 256, "{arch}.full_attention_interval": 4}
    return gf.write_gguf(path, "qwen35", kv,
                         [("token_embd.weight", (1024, 14982 * 1024), gf.Q.I8)])


def test_the_context_must_fit_the_card(tmp_path):
    big = str(seed_model(tmp_path / "seed.gguf"))
    vram = {"gpu_mib": 24576, "fixed_mib": 1024, "headroom_mib": 1024}
    line = (f"llama-server -m {big} -c {{ctx}} -ctk q8_0 -ctv f16 --port 7770 --host 0.0.0.0 "
            "--alias frank")
    fits = run(line.format(ctx=131072), endpoint(vram=vram))
    assert [f.severity for f in fits] == ["note"]  # only the FA-all-quants build reminder
    (short,) = [f for f in run(line.format(ctx=196608), endpoint(vram=vram))
                if f.severity == "fail"]
    assert short.what.startswith("ctx 196608 does not fit") or "short" in short.what
    assert short.fix.startswith("lower the context to ")


def test_the_sliding_window_cache_follows_the_serve_flags(tmp_path):
    """Gemma 3 270M's shape at 128K: 384 MiB for the 3 full layers and 15 MiB for the 15 sliding
    ones fit a 1 GiB card; --swa-full gives the sliding ones the whole context (2304 MiB more)."""
    gemma = str(gf.sliding(tmp_path / "gemma.gguf", window=512, blocks=18))
    vram = {"gpu_mib": 1024, "fixed_mib": 64}
    line = f"llama-server -m {gemma} -c 131072 --port 7770 --host 0.0.0.0 --alias frank"
    assert [f for f in run(line, endpoint(vram=vram)) if f.severity == "fail"] == []
    (full,) = [f for f in run(line + " --swa-full", endpoint(vram=vram)) if f.severity == "fail"]
    assert "does not fit" in full.what and "kv 2304 " in full.what
    (wide,) = [f for f in run(line + " -ub 65536", endpoint(vram=vram)) if f.severity == "fail"]
    assert "kv 1351.5 " in wide.what  # 384 MiB + 15 layers x (512 + 65536 cells) x 1 KiB


def test_the_recurrent_state_follows_the_mtp_draft_length(tmp_path):
    """A hybrid served with --spec-type draft-mtp keeps --spec-draft-n-max snapshots of its
    recurrent state per sequence: 6 DeltaNet layers x 73 KiB, 4 rows at the default, 2 at 1."""
    hybrid = str(gf.hybrid(tmp_path / "hybrid.gguf", nextn=1))
    vram = {"gpu_mib": 0.5, "fixed_mib": 0}
    line = (f"llama-server -m {hybrid} -c 256 --port 7770 --host 0.0.0.0 --alias frank "
            "--spec-type draft-mtp")

    def recurrent(extra: str = "") -> str:
        (short,) = [f for f in run(line + extra, endpoint(vram=vram)) if f.severity == "fail"]
        return short.what.partition("recurrent state ")[2].partition(" ")[0]

    assert recurrent() == "1.7"                          # 6 x 74752 B x (1 + 3)
    assert recurrent(" --spec-draft-n-max 1") == "0.9"   # x (1 + 1)


VLLM = ("vllm serve /srv/qwen --served-model-name frank --port 7770 --max-model-len 131072 "
        "--enable-auto-tool-choice --tool-call-parser qwen3_xml --reasoning-parser qwen3 "
        "--enable-prefix-caching --speculative-config '{\"method\": \"ngram\"}'")
VLLM_EXPECT = {"tools": True, "reasoning": True, "spec_decode": True, "params": True}
VLLM_FAULTS = [
    ("no-auto-tool-choice", ("--enable-auto-tool-choice ", ""), "has no "
     "--enable-auto-tool-choice: clients send tool_choice \"auto\""),
    ("no-tool-parser", ("--tool-call-parser qwen3_xml ", ""), "has no --tool-call-parser"),
    ("no-reasoning-parser", ("--reasoning-parser qwen3 ", ""), "reasoning is asked, but the "
     "serve command has no --reasoning-parser"),
    ("no-speculative-config", (" --speculative-config '{\"method\": \"ngram\"}'", ""),
     "spec_decode is asked, but the serve command has no --speculative-config"),
    ("served-name", ("--served-model-name frank", "--served-model-name qwen other"),
     "serves it as qwen, other"),
    ("port", ("--port 7770", "--port 8000"), "listens on port 8000"),
    # params asks top_logprobs 2; vLLM's default (20) serves, a lower cap refuses it
    ("max-logprobs", ("--port 7770", "--port 7770 --max-logprobs 1"),
     "params is asked, but --max-logprobs is 1: clients asking top_logprobs above it"),
]


def test_healthy_vllm_config_has_no_findings():
    assert run(VLLM, endpoint("vllm", **VLLM_EXPECT)) == []
    assert run("python3 -m vllm.entrypoints.openai.api_server --model /m --port 7770 "
               "--served-model-name x frank", endpoint("vllm")) == []


@pytest.mark.parametrize("edit,expected", [f[1:] for f in VLLM_FAULTS],
                         ids=[f[0] for f in VLLM_FAULTS])
def test_each_vllm_fault_yields_its_finding(edit, expected):
    assert edit[0] in VLLM
    texts = [f.what for f in run(VLLM.replace(*edit), endpoint("vllm", **VLLM_EXPECT))]
    assert any(expected in t for t in texts), texts


def test_sglang_tool_parser_and_metrics():
    line = ("python -m sglang.launch_server --model-path /m --served-model-name frank "
            "--host 0.0.0.0 --port 7770 --tool-call-parser qwen25 --speculative-algorithm EAGLE "
            "--enable-metrics")
    ep = endpoint("sglang", tools=True, spec_decode=True)
    assert run(line, ep) == []
    texts = [f.what for f in run(line.replace(" --enable-metrics", ""), ep)]
    assert texts == ["spec_decode is asked, but the serve command has no --enable-metrics: the "
                     "acceptance gauges live on /metrics, off without --enable-metrics"]


GOOD_UNIT = """[Service]
ExecStart={bin} -m {plain} --port 7770 --host 0.0.0.0
Restart=on-failure
RestartSec=10
LimitMEMLOCK=infinity

[Install]
WantedBy=multi-user.target
"""


@pytest.mark.parametrize("edit,expected", [
    (("Restart=on-failure", "Restart=no"), "[Service] Restart=no: a crash leaves the endpoint"),
    (("RestartSec=10\n", ""), "[Service] no RestartSec="),
    (("LimitMEMLOCK=infinity\n", ""), "[Service] no LimitMEMLOCK=: a native CUDA server"),
    (("WantedBy=multi-user.target\n", ""), "[Install] no WantedBy=: the unit does not start"),
])
def test_unit_policy(box, tmp_path, edit, expected):
    unit = tmp_path / "u.service"
    ep = bind(Endpoint("frank", "llamacpp", url="http://10.0.0.5:7770", expect={
        "serve": {"unit_policy": True}}))
    unit.write_text(GOOD_UNIT.format(**box))
    assert findings(read({"unit": str(unit)}), ep, driver_for("llamacpp")) == []
    unit.write_text(GOOD_UNIT.format(**box).replace(*edit))
    (found,) = findings(read({"unit": str(unit)}), ep, driver_for("llamacpp"))
    assert expected in found.what and found.where.startswith(str(unit))
    plain = bind(Endpoint("frank", "llamacpp", url="http://10.0.0.5:7770"))  # policy not asked
    assert findings(read({"unit": str(unit)}), plain, driver_for("llamacpp")) == []


def test_the_examples_gate_notes_the_weights_that_live_on_the_serving_host():
    """examples/serve names two hosts of the ops network; their models, projector and template
    are on those hosts, not here: notes, not failures."""

    from pytest_frank import fleet

    examples = ROOT / "examples" / "serve" / "fleet.yaml"
    for name, ep in fleet.load(examples, claims=declared()).items():
        driver = driver_for(ep.engine)
        cmd = read(ep.serve,
                   is_server=lambda argv, d=driver: d.launch.serve_flags.start(argv) is not None)
        found = findings(cmd, ep, driver)
        assert found and all(f.severity == "note" for f in found), (name, found)
        assert all(f"not checked here (the file lives on {ep.host})" in f.what
                   or f"the model file lives on {ep.host}" in f.what for f in found), found


def test_the_examples_gate_passes_offline_from_a_copy_of_the_repository(pytester):
    """The README's CI command, on a runner that has the serve files and not the models."""
    import shutil

    shutil.copytree(ROOT / "examples", pytester.path / "examples")
    result = pytester.runpytest("--endpoints", "examples/serve/fleet.yaml", "--frank-offline",
                                "-p", "no:cacheprovider", "--frank-report", "gate.md")
    result.assert_outcomes(passed=2)
    wiki = (pytester.path / "gate.md").read_text()
    assert "not checked here (the file lives on 192.168.0.235)" in wiki
    assert "not checked here (the file lives on 192.168.0.143)" in wiki


@pytest.mark.parametrize("url, host", [
    ("http://127.0.0.1:7770/v1", None),          # a local endpoint
    ("http://10.0.0.5:7770/v1", "localhost"),    # serve.host: the files are this machine's
])
def test_a_missing_file_fails_where_the_files_are_this_machines(box, url, host):
    line = llama_line(box).replace(f"-m {box['mtp']}", "-m /nowhere/Q.gguf")
    ep = endpoint(url=url, **LLAMA_EXPECT)
    spec = {"command": line, **({"host": host} if host else {})}
    ep.serve = spec
    found = [f for f in findings(read(spec), ep, driver_for("llamacpp")) if "Q.gguf" in f.what]
    assert [f.severity for f in found] == ["fail"], found
    assert "-m /nowhere/Q.gguf: no such file" in found[0].what


def test_serve_host_names_another_machine_behind_a_local_url(box):
    """A tunnel or proxy on 127.0.0.1 in front of a GPU host: serve.host says where files are."""
    line = llama_line(box).replace(f"-m {box['mtp']}", "-m /nowhere/Q.gguf")
    spec = {"command": line, "host": "gpu-7.example"}
    ep = endpoint(url="http://127.0.0.1:7770/v1", **LLAMA_EXPECT)
    ep.serve = spec
    found = [f for f in findings(read(spec), ep, driver_for("llamacpp")) if "Q.gguf" in f.what]
    assert [(f.severity, f.what) for f in found] == [
        ("note", "-m /nowhere/Q.gguf: not checked here (the file lives on gpu-7.example)")]


def test_a_launched_endpoint_is_local():
    ep = Endpoint("frank", "llamacpp", launch={"model": "selftest"})
    assert ep.host is None


@pytest.mark.parametrize("host, local", [
    ("127.0.0.1", True), ("localhost", True), ("::1", True), ("[::1]", True), ("0.0.0.0", True),
    ("10.255.255.1", False), ("192.168.0.235", False), ("no-such-host.invalid", False)])
def test_which_hosts_are_this_machine(host, local):
    from pytest_frank.base.hosts import is_local

    assert is_local(host) is local


def test_this_machines_own_name_and_address_are_local():
    import socket

    from pytest_frank.base.hosts import is_local

    assert is_local(socket.gethostname())
    own = {info[4][0] for info in socket.getaddrinfo(socket.gethostname(), None)}
    assert all(is_local(address) for address in own)


def test_the_agent_claim_needs_jinja_and_vllms_tool_flags(box):
    llama = llama_line(box)
    assert run(llama, endpoint(agent=True)) == []
    texts = [f.what for f in run(llama.replace("--jinja ", ""), endpoint(agent=True))]
    assert any("agent is asked, but the serve command has no --jinja" in t for t in texts), texts
    assert run(VLLM, endpoint("vllm", agent=True)) == []
    for flag, said in (("--enable-auto-tool-choice ", "has no --enable-auto-tool-choice"),
                       ("--tool-call-parser qwen3_xml ", "has no --tool-call-parser")):
        texts = [f.what for f in run(VLLM.replace(flag, ""), endpoint("vllm", agent=True))]
        assert any(t.startswith("agent is asked") and said in t for t in texts), texts


def test_a_flag_two_claims_need_is_one_finding_naming_both():
    found = run("vllm serve /srv/q --served-model-name frank --port 7770",
                endpoint("vllm", tools=True, agent=True))
    assert [f.what.split(":")[0] for f in found] == [
        "tools and agent are asked, but the serve command has no --enable-auto-tool-choice",
        "tools and agent are asked, but the serve command has no --tool-call-parser"]
