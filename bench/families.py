"""Tool-call families x engines: each family healthy, and each family's parser fault.

For each family the engine runs here, the battery's tools (with none and parallel calls), agent,
stream and reasoning on a server that serves the family's self-test model under its own template
(so the engine takes its parser for that family), then the family's parser fault: the same call
written as text where the template is not the family's, asked with tool_choice auto. A healthy
row must pass every asked check (a failed one is a false failure); a fault row must fail
test_tools_auto naming the family and, in its fix line, what the engine needs to parse it. On
vLLM, which picks its parser from a flag, the rows are real vLLM servers of
tests/support/vllm_server.py's
configurations (the vLLM environment of tests/support/vllm_env.py): Qwen3 XML under qwen3_xml, its fault
under hermes; gpt-oss harmony under openai and openai_gptoss, its fault without a tool-call
parser, where vLLM drops the calls. The vLLM rows ask no parallel calls (each scripted model
there writes one call).

    python bench/families.py [--keep DIR] [--engine llama.cpp|vLLM ...]
    python bench/families.py --quick     # Hermes JSON on llama.cpp, judged by no target

It prints one row per family and engine and ends with whether the goal is met (0 false failures;
each family's fault caught with its fix), exiting 1 when it is not. The schema corpus is left
out of the healthy rows: where a family writes a string value bare (Qwen3 XML, GLM 4.5),
llama.cpp's grammar leaves a ["string", "null"] value free of its pattern and the corpus fails
it, a finding about the engine that tests/claims/tools/test_tool_formats_real.py pins.
"""

from __future__ import annotations

import argparse
import collections
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import quick
import yaml

# What the healthy rows ask: parallel calls too (each family's model writes two calls in its
# format where two cities are asked), but of harmony, whose call ends its turn on llama.cpp (its
# GPT-OSS grammar allows nothing after a call's arguments). The templates here other than
# Hermes' and Qwen3 XML's have no thinking switch: those rows leave thinking_off out. llama.cpp
# stamps each chunk with the second it sends it, so a stream that crosses a second boundary
# changes `created` (the stream claim's fix: created false), about one run in ten here, whatever
# the family.
EXPECT = {"tools": {"none": True, "parallel": True}, "agent": {"steps": 3},
          "stream": {"created": False}, "reasoning": True}
NO_SWITCH = {"reasoning": {"thinking_off": False}}
# family -> (label, healthy model, its expect changes, the fault's model, what the fault's fix
# must say): llama.cpp, which picks its parser from the served template.
LLAMACPP = {
    "hermes": ("Hermes JSON", "selftest", {}, "selftest:tool_text",
               "llama.cpp reads the tool-call format from the chat template"),
    "qwen3_xml": ("Qwen3 XML", "selftest:qwen3_xml", {}, "selftest:qwen3_xml_text",
                  "the content holds a Qwen3 XML tool call"),
    "kimi_k2": ("Kimi K2", "selftest:kimi_k2", NO_SWITCH, "selftest:kimi_k2_text",
                "the content holds a Kimi K2 tool call"),
    "mistral": ("Mistral", "selftest:mistral", NO_SWITCH, "selftest:mistral_text",
                "the content holds a Mistral tool call"),
    "glm45": ("GLM 4.5", "selftest:glm45", NO_SWITCH, "selftest:glm45_text",
              "the content holds a GLM 4.5 tool call"),
    "deepseek_v31": ("DeepSeek V3.1", "selftest:deepseek_v31", NO_SWITCH,
                     "selftest:deepseek_v31_text", "the content holds a DeepSeek V3.1 tool call"),
    # and its reasoning levels, the template's "Reasoning: LEVEL"
    "harmony": ("harmony", "selftest:harmony",
                {**NO_SWITCH, "tools": {"none": True},
                 "reasoning_effort": {"low": "low", "medium": "medium", "high": "high"}},
                "selftest:harmony_text", "the content holds a gpt-oss harmony tool call"),
}
# vLLM picks its parser from a flag: a row names configurations of tests/support/vllm_server.py's CONFIGS
# (each start costs about 30-60 s; a configuration the suite already serves): the healthy server
# under the family's parsers, and the fault's, with what its failure line says. Not asked there:
# tool_choice none (vLLM keeps the tools in the prompt, so the model calls and the parser drops
# the call: a true failure, fixed by a flag, that tests/vllm/test_tool_families_vllm_real.py pins),
# named tools and test_tools_arguments (each scripted model writes its one call to get_weather,
# whatever tool a grammar forces), and agent steps (both agree with the healthy llama.cpp rows
# on the default).
VLLM_EXPECT = {"tools": {"named": False, "none": False}, "agent": True, "stream": True,
               "reasoning": True}
VLLM: dict[str, tuple] = {
    "qwen3_xml": ("Qwen3 XML", "QWEN3_XML", VLLM_EXPECT, "LONG", "--tool-call-parser qwen3_xml",
                  "leaked markup"),
    "harmony": ("harmony", "HARMONY",
                {**VLLM_EXPECT, **NO_SWITCH,
                 "reasoning_effort": {"low": "low", "medium": "medium", "high": "high"}},
                "HARMONY_BARE", "--tool-call-parser openai", "reached the client as neither"),
}
ENGINES = {"llama.cpp": LLAMACPP, "vLLM": VLLM}


def entry(model: str, expect: dict) -> dict:
    return {"engine": "llamacpp", "ready_timeout": 30, "launch": {"model": model},
            "expect": expect}


class VllmServers:
    """Real vLLM servers of tests/support/vllm_server.py's configurations, started on first use."""

    def __init__(self, folder: Path) -> None:
        self.folder, self.pool = folder, None

    def entry(self, config: str, expect: dict) -> dict:
        if self.pool is None:
            sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "support"))
            import vllm_env
            import vllm_server

            self.configs = vllm_server.CONFIGS
            self.pool = vllm_server.ServerPool(vllm_env.ensure(), self.folder)
        server = self.pool.get(**self.configs[config])
        return {"url": server.url, "engine": "vllm", "alias": server.model,
                **({"api_key": self.configs[config]["api_key"]}
                   if "api_key" in self.configs[config] else {}),
                "expect": expect}

    def close(self) -> None:
        if self.pool is not None:
            self.pool.close()


def run(folder: Path, name: str, ep: dict, *args: str) -> list[dict]:
    """The run's rows (--frank-json: test, verdict, line, fix) of one pytest run on one
    endpoint."""
    fleet, report = folder / f"{name}.yaml", folder / f"{name}.json"
    fleet.write_text(yaml.safe_dump({"endpoints": {name: ep}}, sort_keys=False))
    cmd = [sys.executable, "-m", "pytest", "--endpoints", str(fleet), "-q", "-p", "no:randomly",
           "-p", "no:cacheprovider", "-p", "no:hypothesispytest", f"--frank-json={report}", *args]
    done = subprocess.run(cmd, cwd=folder, capture_output=True, text=True, timeout=600)
    if done.returncode not in (0, 1) or not report.exists():
        sys.exit(f"{name}: pytest exited {done.returncode} without a report:\n"
                 f"{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
    return json.loads(report.read_text())["rows"]


def healthy(folder: Path, family: str, ep: dict, *args: str) -> tuple[bool, str]:
    rows = run(folder, f"{family}-healthy", ep,
               "-m", "tools or agent or stream or reasoning or reasoning_effort", *args)
    verdicts = collections.Counter(row["verdict"] for row in rows)
    failed = sorted(row["key"].split("::")[-1] for row in rows
                    if row["verdict"] in ("FAIL", "error"))
    said = ", ".join(f"{n} {verdict}" for verdict, n in sorted(verdicts.items()))
    return not failed, (f"FALSE FAILURE {', '.join(failed)} ({said})" if failed else
                        f"pass ({said})")


def fault(folder: Path, family: str, ep: dict, fix: str,
          says: str = "leaked markup") -> tuple[bool, str]:
    rows = run(folder, f"{family}-fault", ep, "-m", "tools", "-k", "test_tools_auto")
    row = rows[0] if rows else {"verdict": "missing", "line": "", "fix": ""}
    line, told = row.get("line") or "", row.get("fix") or ""
    caught = row["verdict"] == "FAIL" and says in line and fix in told
    # caught: the fix says it; missed: the line says what the check saw instead
    return caught, (f"caught, fix: {told[:120]}" if caught else
                    f"MISSED ({row['verdict']}): {line[:100]} | fix: {told[:80]}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keep", type=Path, help="folder to keep the fleets and reports in")
    parser.add_argument("--engine", choices=sorted(ENGINES), action="append",
                        help="run this engine's rows only (repeatable; default: all)")
    quick.flag(parser)
    opts = parser.parse_args()
    # quick: one family's rows on llama.cpp (each vLLM row starts real vLLM servers: minutes);
    # its healthy row asks the tools claim alone
    engines = {"llama.cpp": {"hermes": LLAMACPP["hermes"]}} if opts.quick else ENGINES
    asked = ["-k", "test_tools"] if opts.quick else []
    false_failures = missed = 0
    with tempfile.TemporaryDirectory() as tmp:
        folder = opts.keep or Path(tmp)
        folder.mkdir(parents=True, exist_ok=True)
        vllm = VllmServers(folder)
        print(f"{'family':<14} {'engine':<10} {'healthy':<32} parser fault")
        try:
            for engine, rows in engines.items():
                if opts.engine and engine not in opts.engine:
                    continue
                for family, (label, model, changes, bad_model, fix, *says) in rows.items():
                    start = time.monotonic()
                    if engine == "vLLM":
                        ok, said = healthy(folder, family, vllm.entry(model, changes),
                                           "-k", "not test_tools_arguments")
                        caught, told = fault(folder, family,
                                             vllm.entry(bad_model, {"tools": True}), fix, *says)
                    else:
                        ok, said = healthy(folder, family,
                                           entry(model, {**EXPECT, **changes}), *asked)
                        caught, told = fault(folder, family, entry(bad_model, {"tools": True}),
                                             fix)
                    false_failures += not ok
                    missed += not caught
                    print(f"{label:<14} {engine:<10} {said:<32} {told} "
                          f"({time.monotonic() - start:.0f}s)", flush=True)
        finally:
            vllm.close()
    met = false_failures == 0 and missed == 0
    print(f"goal {'met' if met else 'NOT met'}: {false_failures} false failure(s) across the "
          f"families' healthy rows; {missed} parser fault(s) missed or without their fix")
    return quick.judged(met, opts.quick)


if __name__ == "__main__":
    sys.exit(main())
