#!/usr/bin/env bash
# Start llama-server for frank-default-large. Fail loudly before touching the GPU.
set -euo pipefail
LLAMA_BIN="${LLAMA_BIN:-/home/dank/llama.cpp/build/bin/llama-server}"

for f in "$LLAMA_BIN" "$MODEL" "$MMPROJ"; do
  [ -e "$f" ] || { echo "missing: $f" >&2; exit 1; }
done

ARGS=(
  -m "$MODEL"
  --mmproj "$MMPROJ"
  --alias "$ALIAS"
  --host 0.0.0.0 --port "$PORT"
  -c "$CTX_SIZE" -np "$PARALLEL"
  -ngl 999 -fa on -ctk f16 -ctv f16
  --spec-type draft-mtp --spec-draft-n-max 2
  --jinja --reasoning-format deepseek --reasoning-budget -1
  --metrics --temp 0.0
)

exec "$LLAMA_BIN" "${ARGS[@]}"
