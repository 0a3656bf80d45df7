"""serve.read: systemd units, env files, serve scripts and command lines into one ServeCommand,
each argument with the file and line its value comes from. Pure parsing: no engine involved."""

from __future__ import annotations

import textwrap

import pytest

from pytest_frank.serve import ServeError, read

pytestmark = pytest.mark.unit


def write(tmp_path, name: str, text: str):
    path = tmp_path / name
    path.write_text(textwrap.dedent(text).lstrip("\n"))
    return path


def argv(cmd) -> list[str]:
    return [a.text for a in cmd.argv]


def arg_after(cmd, flag: str):
    words = argv(cmd)
    return cmd.argv[words.index(flag) + 1]


def test_unit_continuations_environment_and_files(tmp_path):
    env = write(tmp_path, "x.env", """
        # the model
        MODEL=/m/q.gguf
        ALIAS="big model"
        """)
    unit = write(tmp_path, "x.service", f"""
        [Service]
        Environment="PORT=7770" HOST=0.0.0.0
        EnvironmentFile=-/nowhere/optional.env
        EnvironmentFile={env}
        ExecStart=-/opt/bin/llama-server \\
            -m ${{MODEL}} \\
        # a comment inside the continuation
            --alias ${{ALIAS}} --port $PORT --host $HOST %n
        """)
    cmd = read({"unit": str(unit)})
    assert argv(cmd) == ["/opt/bin/llama-server", "-m", "/m/q.gguf", "--alias", "big model",
                         "--port", "7770", "--host", "0.0.0.0", "x.service"]
    assert str(cmd.where) == f"{unit}:5"
    assert str(arg_after(cmd, "-m").where) == f"{env}:2"      # where MODEL is set
    assert str(arg_after(cmd, "--port").where) == f"{unit}:2"  # Environment= line
    assert str(cmd.argv[1].where) == f"{unit}:6"               # the flag's own line
    assert cmd.service == "x.service" and cmd.kind == "unit"
    assert cmd.unresolved == []  # the missing file was optional (-)


def test_systemd_splits_bare_dollar_words_but_not_braced_ones(tmp_path):
    unit = write(tmp_path, "s.service", """
        [Service]
        Environment="ARGS=-c 4096" "ONE=a b"
        ExecStart=/bin/llama-server $ARGS ${ONE}
        """)
    assert argv(read({"unit": str(unit)}))[1:] == ["-c", "4096", "a b"]


def test_missing_required_environment_file_and_unset_variables_are_named(tmp_path):
    unit = write(tmp_path, "u.service", """
        [Service]
        EnvironmentFile=/etc/frank/missing.env
        ExecStart=/bin/llama-server -c ${CTX_SIZE}
        """)
    cmd = read({"unit": str(unit)})
    assert argv(cmd) == ["/bin/llama-server", "-c", ""]  # ${X}: always exactly one argument
    assert any("u.service:2: EnvironmentFile=/etc/frank/missing.env is not on this machine"
               in u for u in cmd.unresolved)
    assert any("u.service:3: ${CTX_SIZE} is not set" in u for u in cmd.unresolved)


def test_serve_env_stands_in_for_the_units_environment_file(tmp_path):
    env = write(tmp_path, "frank.env", "CTX_SIZE=65536\n")
    unit = write(tmp_path, "u.service", """
        [Service]
        EnvironmentFile=/home/dank/scripts/frank.env
        ExecStart=/bin/llama-server -c ${CTX_SIZE}
        """)
    cmd = read({"unit": str(unit), "env": str(env)})
    assert argv(cmd)[-1] == "65536" and cmd.unresolved == []


def test_systemd_env_files_do_not_expand_variables(tmp_path):
    env = write(tmp_path, "e.env", "DIR=/m\nMODEL=${DIR}/q.gguf\n")
    unit = write(tmp_path, "u.service", f"""
        [Service]
        EnvironmentFile={env}
        ExecStart=/bin/llama-server -m ${{MODEL}}
        """)
    cmd = read({"unit": str(unit)})
    assert argv(cmd)[-1] == "${DIR}/q.gguf"
    assert any("systemd does not expand variables" in u for u in cmd.unresolved)


def test_script_arrays_sources_defaults_and_exec(tmp_path):
    write(tmp_path, "common.sh", "MODEL_DIR=/models\n")
    env = write(tmp_path, "s.env", "CTX_SIZE=131072\n")
    script = write(tmp_path, "serve.sh", """
        #!/usr/bin/env bash
        set -euo pipefail
        source common.sh
        BIN="${LLAMA_BIN:-/opt/llama/build/bin/llama-server}"
        : "${PARALLEL:=2}"
        for f in "$BIN" "$MODEL_DIR"; do
          [ -e "$f" ] || { echo "missing $f" >&2; exit 1; }
        done
        ARGS=(
          -m "$MODEL_DIR/q.gguf"   # the weights
          -c "$CTX_SIZE" -np "$PARALLEL"
        )
        ARGS+=(--alias 'a b')
        exec env CUDA_VISIBLE_DEVICES=0 "$BIN" "${ARGS[@]}" --metrics
        """)
    cmd = read({"script": str(script), "env": str(env)})
    assert argv(cmd) == ["/opt/llama/build/bin/llama-server", "-m", "/models/q.gguf", "-c",
                         "131072", "-np", "2", "--alias", "a b", "--metrics"]
    assert str(arg_after(cmd, "-c").where) == f"{env}:1"
    assert str(cmd.where) == f"{script}:14"
    assert cmd.kind == "script" and cmd.unresolved == []


def test_unit_that_runs_a_script_reads_the_script(tmp_path):
    script = write(tmp_path, "run.sh", "exec /bin/llama-server -c \"$CTX\"\n")
    unit = write(tmp_path, "u.service", f"""
        [Service]
        Environment=CTX=4096
        ExecStart={script}
        """)
    cmd = read({"unit": str(unit)}, is_server=lambda words: "llama-server" in words[0])
    assert argv(cmd) == ["/bin/llama-server", "-c", "4096"]
    assert cmd.service == "u.service"


def test_command_quoting_and_command_substitution(tmp_path):
    cmd = read({"command": "vllm serve /m --served-model-name 'a b' --port $(cat port)"})
    assert argv(cmd) == ["vllm", "serve", "/m", "--served-model-name", "a b", "--port",
                         "$(cat port)"]
    assert cmd.unresolved == ["serve.command:1: $(cat port) is a command substitution "
                              "(not run here)"]


def test_relative_paths_are_relative_to_the_given_folder(tmp_path):
    write(tmp_path, "s.sh", "exec llama-server -m x.gguf\n")
    assert argv(read({"script": "s.sh"}, tmp_path))[0] == "llama-server"


@pytest.mark.parametrize("name,text,line,why", [
    ("q.sh", "exec llama-server --alias 'open\n", 1, "single quote is never closed"),
    ("d.sh", "A=1\nexec llama-server --alias \"open\n", 2, "double quote is never closed"),
    ("u.service", "[Service\nExecStart=/bin/x\n", 1, "is not closed with ]"),
    ("v.service", "[Service]\njunk line\n", 2, "is not a Key=value assignment"),
    ("w.service", "[Service]\nEnvironment=\"A 1\"\nExecStart=/bin/x\n", 2, "not NAME=value"),
    ("n.service", "[Service]\nRestart=always\n", None, "no ExecStart="),
    ("e.sh", "set -e\necho hi\n", None, "no command in the script starts a server"),
])
def test_broken_files_name_the_file_line_and_reason(tmp_path, name, text, line, why):
    path = write(tmp_path, name, text)
    key = "unit" if name.endswith(".service") else "script"
    with pytest.raises(ServeError) as err:
        read({key: str(path)})
    where = f"{path}:{line}:" if line else f"{path}:"
    assert str(err.value).startswith(where) and why in str(err.value)


def test_missing_file_and_oversized_file(tmp_path):
    with pytest.raises(ServeError, match="no such file"):
        read({"script": str(tmp_path / "gone.sh")})
    big = tmp_path / "big.sh"
    big.write_bytes(b"#" * (2 << 20))
    with pytest.raises(ServeError, match="not a serve file"):
        read({"script": str(big)})
