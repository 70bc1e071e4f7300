#!/usr/bin/env bash
# Evaluate one model under each recurrent-state dtype on a real serving engine, then compare.
#   scripts/recipes/arms.sh ENGINE MODEL [TASKS] [ARMS]
#   ENGINE: vllm | sglang | atom      TASKS: evalkit task list (default gsm8k)
#   ARMS: space-separated, baseline first (default "fp32 fp16 bf16")
# Env: PORT (default 8000), OUT (default runs), EVALKIT_RUN_ARGS (extra `evalkit run` flags),
#      SERVER_ARGS (extra server flags, e.g. "-tp 8"), START_TIMEOUT_S (default 1800).
# `evalkit recipes --engine ENGINE` prints the same commands for copy-paste.
set -euo pipefail
ENGINE=${1:?engine: vllm|sglang|atom}
MODEL=${2:?model path or hub id}
TASKS=${3:-gsm8k}
ARMS=${4:-fp32 fp16 bf16}
PORT=${PORT:-8000}
OUT=${OUT:-runs}
START_TIMEOUT_S=${START_TIMEOUT_S:-1800}

long() { case $1 in fp32) echo float32;; fp16) echo float16;; bf16) echo bfloat16;;
         *) echo "unknown arm $1" >&2; exit 2;; esac; }

start_server() {  # $1 = arm; sets NOTE (recorded in the manifest) and SERVER_PID
  local arm=$1
  case $ENGINE in
    vllm)   NOTE="vllm --mamba-ssm-cache-dtype $(long "$arm")"
            vllm serve "$MODEL" --host 127.0.0.1 --port "$PORT" --trust-remote-code \
              --mamba-ssm-cache-dtype "$(long "$arm")" ${SERVER_ARGS:-} & ;;
    sglang) NOTE="sglang --mamba-ssm-dtype $(long "$arm")"
            python -m sglang.launch_server --model-path "$MODEL" --host 127.0.0.1 --port "$PORT" \
              --trust-remote-code --mamba-ssm-dtype "$(long "$arm")" ${SERVER_ARGS:-} & ;;
    atom)   NOTE="atom ATOM_GDN_SSM_DTYPE=$arm"
            ATOM_GDN_SSM_DTYPE=$arm python -m atom.entrypoints.openai_server --model "$MODEL" \
              --host 127.0.0.1 --server-port "$PORT" ${SERVER_ARGS:-} & ;;
    *) echo "unknown engine $ENGINE" >&2; exit 2;;
  esac
  SERVER_PID=$!
  local waited=0
  until curl -sf "http://127.0.0.1:$PORT/v1/models" >/dev/null; do
    kill -0 "$SERVER_PID" 2>/dev/null || { echo "$ENGINE server exited during start-up" >&2; exit 1; }
    sleep 5; waited=$((waited + 5))
    [ "$waited" -lt "$START_TIMEOUT_S" ] || { echo "server not up after ${waited}s" >&2; kill "$SERVER_PID"; exit 1; }
  done
}

stop_server() { kill "$SERVER_PID" 2>/dev/null || true; wait "$SERVER_PID" 2>/dev/null || true; }
trap stop_server EXIT

for arm in $ARMS; do
  echo "== $ENGINE arm $arm"
  start_server "$arm"
  # shellcheck disable=SC2086
  evalkit run --server "http://127.0.0.1:$PORT" --model "$MODEL" --tokenizer "$MODEL" \
    --arm "$ENGINE-$arm" --arm-note "$NOTE" --tasks "$TASKS" --out "$OUT/$ENGINE-$arm" ${EVALKIT_RUN_ARGS:-}
  stop_server
done

set -- $ARMS
base=$1; shift
for arm in "$@"; do
  evalkit compare "$OUT/$ENGINE-$base" "$OUT/$ENGINE-$arm"
done
