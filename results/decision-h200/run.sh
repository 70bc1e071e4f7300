#!/usr/bin/env bash
# One device call (H200), issue 38: `evalkit ab` on the reference model against the pre-registered
# plan plan-ab-main.yaml (copy_list and kv_recite at 2k, 5 pp / 0.01 nats per token, 3 O'Brien-Fleming
# looks) with a positive control (m3-rtz) and fp16, then the main job's numerics floors on this GPU:
# the fp32 arm with the default kernels, with the other registered KDA prefill variant (split), with
# the servers' bf16 prefill products, and the fp16 arm.
# Usage (device, repository root, carrying .whl): bash results/decision-h200/run.sh $OUT
set -u
OUT=${1:?usage: run.sh OUT}
W=/tmp/decision-h200 && rm -rf $W && mkdir -p $W
source scripts/device_setup.sh
export PYTHONPYCACHEPREFIX=/tmp/pycache
P=results/decision-h200/plan-ab-main.yaml
for cand in m3-rtz fp16; do
  timeout 200 python3 -m evalkit ab --plan $P --candidate $cand --out $W/ab/$cand --device cuda --no-progress \
    > $W/ab-$cand.txt 2>&1; echo "ab $cand exit $?" >> $W/status.txt
done
run() {  # NAME ARM [KERNELS]
  timeout 90 python3 -m evalkit run --arm "$2" ${3:+--kernels "$3"} --out $W/floor/$1 --no-progress > $W/floor-$1.txt 2>&1
  echo "run $1 exit $?" >> $W/status.txt
}
run reference-fp32 fp32
run reference-fp32-split fp32 kda_prefill=split
run reference-fp32-bf16dots fp32 prefill_dots=bf16
run reference-fp16 fp16
find $W -name '*.prompts*' -delete 2>/dev/null
tar czf $OUT/decision-h200.tgz -C $W .
cat $W/status.txt
