#!/usr/bin/env bash
# One device call (H200), issue 38: `evalkit ab` again on the reference model against the same
# pre-registered plan (../plan-ab-main.yaml) with the rules of the current code: per-question
# interleaving, the exact loss bound, one engine per arm for the run. The positive control m3-rtz
# first runs strictly per question (--block 1) for at most 90 s, then resumes with --block 16 (a
# resume across block sizes asks nothing twice; batch-invariant decoding gives the same answers);
# fp16 runs with --block 16. Each log line carries a time stamp, so the per-question cost of
# --block 1 against --block 16 is read from the logs.
# Usage (device, repository root, carrying .whl): bash results/decision-h200/ab-v2/run.sh $OUT
set -u
OUT=${1:?usage: run.sh OUT}
W=/tmp/ab-v2 && rm -rf $W && mkdir -p $W
source scripts/device_setup.sh
export PYTHONPYCACHEPREFIX=/tmp/pycache PYTHONUNBUFFERED=1
P=results/decision-h200/plan-ab-main.yaml
stamp() { while IFS= read -r line; do printf '%s %s\n' "$(date +%s.%N | cut -c1-14)" "$line"; done; }
ab() {  # CANDIDATE BLOCK TIMEOUT
  local t0=$(date +%s.%N)
  timeout "$3" python3 -m evalkit ab --plan $P --candidate "$1" --block "$2" --out $W/ab/$1 --device cuda \
    --no-progress 2>&1 | stamp >> $W/ab-$1.txt
  echo "ab $1 block $2 exit ${PIPESTATUS[0]} wall $(python3 -c "import time;print(round(time.time()-$t0,1))") s" | tee -a $W/status.txt
}
ab m3-rtz 1 90
ab m3-rtz 16 100
ab fp16 16 150
find $W -name '*.prompts*' -delete 2>/dev/null
tar czf $OUT/ab-v2.tgz -C $W .
