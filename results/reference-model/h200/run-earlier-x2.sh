#!/usr/bin/env bash
# One call on a two-H200 machine (issues 13 and 18):
#   GPU 0: the KDA reference model v2 (MODEL), three precision sweeps side by side, 100 questions
#          per task and length, every arm with the paired log-probability measure:
#            short: copy_list, kv_recite, register_short at 1k/2k/4k/8k      (short answers)
#            long:  copy_list_long, kv_recite_long at 2k/4k/8k               (>= 256 generated tokens)
#            ruler: vt, niah_multikey_2, register_long at 4k/8k/16k
#          arms: fp32 (baseline), fp16, bf16, m5, m4, m3, m2, fp8_e4m3, m3-rtz (truncation: the
#          positive control, rounded after every generated token);
#   GPU 1: the Gated DeltaNet twin's training run (scripts/train_reference_model.py --arch gdn).
# Each sweep stops itself before the call's limit; what finished is on disk and a rerun resumes.
#   source scripts/device_setup.sh && bash results/reference-model/h200/run-earlier-x2.sh OUTDIR MODEL [LIMIT]
set -u
OUT_DIR=${1:?usage: results/reference-model/h200/run-earlier-x2.sh OUTDIR MODEL [LIMIT]}
MODEL=${2:?model directory}
LIMIT=${3:-100}
ARMS=${ARMS:-fp32,fp16,bf16,m5,m4,m3,m2,fp8_e4m3,m3-rtz}
W=/tmp/v2
mkdir -p "$W" "$OUT_DIR"
export PYTHONUNBUFFERED=1
start=$(date +%s)
GPUS=$(python3 -c "import torch; print(torch.cuda.device_count())")
echo "GPUs: $GPUS; start $(date +%T)"
if [ "${SKIP_GDN:-0}" != 1 ]; then
  CUDA_VISIBLE_DEVICES=$(( GPUS >= 2 ? 1 : 0 )) TRITON_CACHE_DIR=/tmp/triton-gdn \
    python3 scripts/train_reference_model.py --arch gdn --out /tmp/rm-gdn --bundle "$OUT_DIR/gdn.tar.gz" \
      --minutes "${GDN_MINUTES:-8.9}" --workers 8 --warm-helpers 3 > "$OUT_DIR/gdn-train.log" 2>&1 &
fi
sweep() {  # name tasks lengths
  CUDA_VISIBLE_DEVICES=0 timeout "${SWEEP_S:-510}" python3 -m evalkit sweep --device cuda --model "$MODEL" \
    --arms "$ARMS" --tasks "$2" --lengths "$3" --limit "$LIMIT" --margin 0.05 --no-progress \
    --out "$W/$1" > "$W/$1.log" 2>&1
  echo "sweep $1 rc=$? after $(( $(date +%s) - start )) s"
}
sweep short copy_list,kv_recite,register_short 1k,2k,4k,8k &
sweep long copy_list_long,kv_recite_long 2k,4k,8k &
sweep ruler vt,niah_multikey_2,register_long 4k,8k,16k &
wait
for part in short long ruler; do
  echo "=== $part"; grep -E "^evalkit sweep:" "$W/$part.log" | tail -n 4
  [ -f "$W/$part/sweep.md" ] && head -c 2500 "$W/$part/sweep.md"
done
echo "=== gdn"; grep -aE "model:|kernel warm-up|training done|eval |Error|error" "$OUT_DIR/gdn-train.log" | tail -25; tail -c 1500 "$OUT_DIR/gdn-train.log"
tar -czf "$OUT_DIR/v2.tar.gz" -C /tmp v2
echo "end $(date +%T) after $(( $(date +%s) - start )) s"
