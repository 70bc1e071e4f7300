#!/usr/bin/env bash
# The decode-heavy tasks on the H200 (issue 13), one device call with every part bounded:
#   arms (default fp32, fp16, bf16) in parallel processes, each running three groups
#     short: copy_list, kv_recite, register at 1k/2k/4k/8k;
#     long:  copy_list_long, kv_recite_long at 2k/4k/8k (~300 generated tokens per answer);
#     reg:   register_long at 4k/8k (its 144 steps alone take ~2.1k tokens);
#   then, for every arm but fp32, the accuracy by answer position against fp32
#   (scripts/position_report.py, bucket 16) under OUTDIR/positions/<arm>-<group>/.
# Usage on the device: bash scripts/h200_decode_grid.sh OUTDIR [LIMIT] [ARMS] [MINUTES_PER_GROUP]
set -u
OUT_DIR=${1:?usage: h200_decode_grid.sh OUTDIR [LIMIT] [ARMS] [MINUTES_PER_GROUP]}
LIMIT=${2:-100}
ARMS=${3:-fp32,fp16,bf16}
SECS=$(( ${4:-3} * 60 ))
mkdir -p "$OUT_DIR"/runs "$OUT_DIR"/positions
export PYTHONUNBUFFERED=1
HERE=$(cd "$(dirname "$0")" && pwd)

run_group() {  # arm group tasks lengths
  timeout "$SECS" evalkit run --device cuda --arm "$1" --tasks "$3" --lengths "$4" --limit "$LIMIT" \
    --no-progress --out "$OUT_DIR/runs/$1-$2" > "$OUT_DIR/runs/$1-$2.log" 2>&1
  echo "$1 $2 rc=$? $(date +%T)"
}

for arm in ${ARMS//,/ }; do
  ( run_group "$arm" short copy_list,kv_recite,register 1k,2k,4k,8k
    run_group "$arm" long copy_list_long,kv_recite_long 2k,4k,8k
    run_group "$arm" reg register_long 4k,8k ) &
done
wait
for arm in ${ARMS//,/ }; do
  [ "$arm" = fp32 ] && continue
  for group in short long reg; do
    python3 "$HERE/position_report.py" "$OUT_DIR/runs/fp32-$group" "$OUT_DIR/runs/$arm-$group" \
      --out "$OUT_DIR/positions/$arm-$group" > /dev/null 2>&1 || echo "positions $arm $group failed"
  done
done
echo "all done $(date +%T)"
