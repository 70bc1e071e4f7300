#!/usr/bin/env bash
# One call on one GPU (issue 41; run on an H100, call.log): the three reference models (KDA v2, its Gated DeltaNet twin, the
# Mamba2 model: same sizes, tokenizer, data, loss and training clock) swept on the same retrieval
# questions in the same call, so the three families sit side by side on one device and one version
# of each task (the KDA/GDN sweeps of results/reference-model{,-gdn}/h200/retrieval ran passkey and
# niah_single_1 at task version 1; the tasks are at version 2 since, with other filler).
#   cells  RET_TASKS at RET_LENGTHS, LIMIT questions each (passkey, niah_single_1 at 8k, 16k, 32k)
#   arms   fp32 (baseline), fp16, bf16, m3-rtz (positive control), m4, m3, fp8_e4m3, m5, m2 (the
#          order they run: a sweep cut at its deadline keeps the arms it finished); the Mamba2 model
#          also fp16/bf16@chunk=65536 (one store, at the prompt's end: the full-vs-chunked factor)
# The three sweeps share the GPU, each bounded by the call's deadline. Outputs: part.* (a tar of
# the run directories without prompt text, split at 7 MB) and call.log. Unpack into this folder,
# then `bash scripts/three_family_reports.sh` (paired reports, and the side by side).
# Device (repository root, carrying .whl):
#   OUT=$OUT bash results/retrieval-three-families-h100/run.sh
# CPU dry path (two questions a cell at 512 tokens, three arms; checks the script, measures nothing):
#   DRY=1 OUT=/tmp/r3dry PY=.venv/bin/python bash results/retrieval-three-families-h100/run.sh
[ "${DRY:-0}" = 1 ] || source scripts/device_setup.sh
set -u
start=$(( $(date +%s) - SECONDS ))  # the call's start: the setup above counts too
OUT_DIR=${OUT:?set OUT to the output folder}
PY=${PY:-python3}
CALL_S=${CALL_S:-570}
PACK_S=${PACK_S:-30}
W=${WORK:-/tmp/r3}
if [ "${DRY:-0}" = 1 ]; then
  DEVICE=cpu; LIMIT=${LIMIT:-2}; RET_LENGTHS=${RET_LENGTHS:-512}; ARMS=${ARMS:-fp32,fp16,m3-rtz}
  M2_ARMS=${M2_ARMS:-$ARMS,fp16@chunk=4096}
else
  DEVICE=cuda; LIMIT=${LIMIT:-100}; RET_LENGTHS=${RET_LENGTHS:-8k,16k,32k}
  ARMS=${ARMS:-fp32,fp16,bf16,m3-rtz,m4,m3,fp8_e4m3,m5,m2}
  M2_ARMS=${M2_ARMS:-$ARMS,fp16@chunk=65536,bf16@chunk=65536}
fi
RET_TASKS=${RET_TASKS:-passkey,niah_single_1}
export PYTHONUNBUFFERED=1
rm -rf "$W" && mkdir -p "$W" "$OUT_DIR"
exec > >(tee "$OUT_DIR/call.log") 2>&1
echo "start $(date +%T); device $DEVICE; limit $LIMIT; cells $RET_TASKS at $RET_LENGTHS"
S=$(( start + CALL_S - PACK_S - $(date +%s) ))
echo "sweeps get $S s each"
sweep() {  # name model arms
  timeout "$S" "$PY" -m evalkit sweep --device "$DEVICE" --model "$2" --arms "$3" --tasks "$RET_TASKS" \
    --lengths "$RET_LENGTHS" --limit "$LIMIT" --margin 0.05 --no-progress --out "$W/$1" > "$W/$1.log" 2>&1
  echo "sweep $1 rc=$? after $(( $(date +%s) - start )) s"
}
pids=()  # `wait` alone would also wait for the tee of the log
sweep kda evalkit/assets/reference-model "$ARMS" & pids+=($!)
sweep gdn models/reference-model-gdn "$ARMS" & pids+=($!)
sweep mamba2 models/reference-model-mamba2 "$M2_ARMS" & pids+=($!)
wait "${pids[@]}"
for part in kda gdn mamba2; do
  echo "=== $part"; grep -E "^evalkit sweep:" "$W/$part.log" | tail -n 20
done
P=$W/pack/three-families
mkdir -p "$P"
"$PY" scripts/copy_run_dirs.py --drop-token-arrays "$W/kda" "$W/gdn" "$W/mamba2" "$P"
cp "$W"/*.log "$P/"
tar -czf - -C "$W/pack" three-families | split -b 7000000 - "$OUT_DIR/part."
ls -la "$OUT_DIR"
echo "end $(date +%T) after $(( $(date +%s) - start )) s"
