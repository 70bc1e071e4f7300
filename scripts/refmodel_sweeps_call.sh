#!/usr/bin/env bash
# One call on one H200 (issues 13 and 18), every part bounded, outputs without prompt text:
#   A. the KDA reference model v2 (MODEL): precision sweeps side by side, LIMIT questions per task
#      and length, arms fp32 (baseline), fp16, bf16, m5, m4, m3, m2, fp8_e4m3, m3-rtz (truncation
#      after every generated token: the positive control), paired log-probability on:
#        short: copy_list, kv_recite, register_short at 1k/2k/4k/8k
#        long:  copy_list_long, kv_recite_long at 2k/4k/8k (>= 256 generated tokens per answer)
#        ruler: vt at 4k/8k/16k
#   B. meanwhile the Gated DeltaNet twin trains (same sizes, data, loss; GDN_MINUTES of wall time,
#      its chunked GDN through FLA's KDA kernel, evalkit/refmodel/gdn_on_kda.py), then its own sweep
#      on the same questions (short tasks at 2k/8k and vt at 8k, the arms above but m2).
#   source scripts/device_setup.sh && bash scripts/refmodel_sweeps_call.sh OUTDIR MODEL [LIMIT]
set -u
OUT_DIR=${1:?usage: scripts/refmodel_sweeps_call.sh OUTDIR MODEL [LIMIT]}
MODEL=${2:?model directory}
LIMIT=${3:-100}
ARMS=${ARMS:-fp32,fp16,bf16,m5,m4,m3,m2,fp8_e4m3,m3-rtz}
GDN_ARMS=${GDN_ARMS:-fp32,fp16,bf16,m5,m4,m3,fp8_e4m3,m3-rtz}
W=/tmp/v2
mkdir -p "$W" "$OUT_DIR"
export PYTHONUNBUFFERED=1
start=$(date +%s)
echo "start $(date +%T)"
sweep() {  # seconds model name tasks lengths arms
  timeout "$1" python3 -m evalkit sweep --device cuda --model "$2" --arms "$6" --tasks "$4" \
    --lengths "$5" --limit "$LIMIT" --margin 0.05 --no-progress --out "$W/$3" > "$W/$3.log" 2>&1
  echo "sweep $3 rc=$? after $(( $(date +%s) - start )) s"
}
sweep "${KDA_S:-440}" "$MODEL" kda-short copy_list,kv_recite,register_short 1k,2k,4k,8k "$ARMS" &
sweep "${KDA_S:-440}" "$MODEL" kda-long copy_list_long,kv_recite_long 2k,4k,8k "$ARMS" &
sweep "${KDA_S:-440}" "$MODEL" kda-ruler vt 4k,8k,16k "$ARMS" &
(
  TRITON_CACHE_DIR=/tmp/triton-gdn timeout "$(( ${GDN_MINUTES_S:-400} + 20 ))" \
    python3 scripts/train_reference_model.py --arch gdn --out /tmp/rm-gdn --bundle "$OUT_DIR/gdn.tar.gz" \
      --minutes "$(python3 -c "print(${GDN_MINUTES_S:-400} / 60)")" --workers 7 --warm-helpers 3 \
      --eval-seconds 20 > "$W/gdn-train.log" 2>&1
  echo "gdn training rc=$? after $(( $(date +%s) - start )) s"
  if [ -f /tmp/rm-gdn/model/model.safetensors ]; then
    left=$(( ${CALL_S:-575} - ($(date +%s) - start) - 10 ))
    sweep "$left" /tmp/rm-gdn/model gdn-short copy_list,kv_recite,register_short 2k,8k "$GDN_ARMS"
  fi
) &
wait
for part in kda-short kda-long kda-ruler gdn-short; do
  echo "=== $part"; grep -E "^evalkit sweep:" "$W/$part.log" 2>/dev/null | tail -n 2
done
echo "=== gdn"; grep -aE "model:|kernel warm-up|training done|eval |Error" "$W/gdn-train.log" | tail -12
python3 scripts/copy_run_dirs.py "$W"/kda-short "$W"/kda-long "$W"/kda-ruler "$W"/gdn-short /tmp/v2c 2>/dev/null
cp "$W"/*.log /tmp/v2c/ 2>/dev/null
tar -czf "$OUT_DIR/v2.tar.gz" -C /tmp v2c
ls -la "$OUT_DIR"
echo "end $(date +%T) after $(( $(date +%s) - start )) s"
