#!/usr/bin/env bash
# One call on one H200 (issue 18): the Gated DeltaNet twin (trained with the KDA model's budget)
# and the KDA reference model v2 side by side on the same questions, every part bounded, outputs
# without prompt text:
#   gdn-short   GDN twin: copy_list, kv_recite, kv_recite_long at 2k (the main job's cells; the
#               twin scores 0 there, so only fp32/fp16/bf16 for the paired log-probability)
#   gdn-ret     GDN twin: RET_TASKS at RET_LENGTHS, LIMIT questions (the tasks it learned: a CPU
#               probe at 4k, 8 questions, gave passkey 8/8, niah_single_1 7/8, vt, kv_retrieval and
#               niah_multikey_2 0/8)
#   kda-ret     KDA v2:   the same cells as gdn-ret
#   drift-gdn, drift-kda   `evalkit drift` (scripts/gpu_drift.py) of each model, fp32 weights,
#               16 prompts of DRIFT_LENGTH tokens, prefill and decode modes, A/A floor
# Arms (sweeps): fp32 (baseline), fp16, bf16, m5, m4, m3, m2, fp8_e4m3, m3-rtz; paired log-probability.
#   source scripts/device_setup.sh && bash results/reference-model-gdn/h200/run.sh OUTDIR [LIMIT]
set -u
OUT_DIR=${1:?usage: results/reference-model-gdn/h200/run.sh OUTDIR [LIMIT]}
LIMIT=${2:-100}
GDN=models/reference-model-gdn
KDA=evalkit/assets/reference-model
ARMS=${ARMS:-fp32,fp16,bf16,m5,m4,m3,m2,fp8_e4m3,m3-rtz}
RET_TASKS=${RET_TASKS:-passkey,niah_single_1}
RET_LENGTHS=${RET_LENGTHS:-8k,16k,32k}
DRIFT_LENGTH=${DRIFT_LENGTH:-32768}
S=${PART_S:-480}
W=/tmp/gdn2
mkdir -p "$W" "$OUT_DIR"
export PYTHONUNBUFFERED=1
start=$(date +%s)
echo "start $(date +%T)"
sweep() {  # model name tasks lengths arms
  timeout "$S" python3 -m evalkit sweep --device cuda --model "$1" --arms "$5" --tasks "$3" \
    --lengths "$4" --limit "$LIMIT" --margin 0.05 --no-progress --out "$W/$2" > "$W/$2.log" 2>&1
  echo "sweep $2 rc=$? after $(( $(date +%s) - start )) s"
}
drift() {  # model name
  python3 scripts/gpu_drift.py --out "$W/$2" --parts ref-fp32 --ref-model "$1" --prompts 16 \
    --ref-length "$DRIFT_LENGTH" --max-minutes "$(python3 -c "print(($S - 30) / 60)")" > "$W/$2.log" 2>&1
  echo "drift $2 rc=$? after $(( $(date +%s) - start )) s"
}
sweep "$GDN" gdn-short copy_list,kv_recite,kv_recite_long 2k fp32,fp16,bf16 &
sweep "$GDN" gdn-ret "$RET_TASKS" "$RET_LENGTHS" "$ARMS" &
sweep "$KDA" kda-ret "$RET_TASKS" "$RET_LENGTHS" "$ARMS" &
drift "$GDN" drift-gdn &
drift "$KDA" drift-kda &
wait
for part in gdn-short gdn-ret kda-ret; do
  echo "=== $part"; grep -E "^evalkit sweep:" "$W/$part.log" 2>/dev/null | tail -n 2
done
for part in drift-gdn drift-kda; do echo "=== $part"; tail -n 4 "$W/$part.log"; done
python3 scripts/copy_run_dirs.py --drop-token-arrays "$W"/gdn-short "$W"/gdn-ret "$W"/kda-ret /tmp/g2c
cp -r "$W"/drift-gdn "$W"/drift-kda /tmp/g2c/ 2>/dev/null
cp "$W"/*.log /tmp/g2c/ 2>/dev/null
tar -czf - -C /tmp g2c | split -b 7000000 - "$OUT_DIR/part."
ls -la "$OUT_DIR"
echo "end $(date +%T) after $(( $(date +%s) - start )) s"
