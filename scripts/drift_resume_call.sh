#!/usr/bin/env bash
# One device call of a drift study that spans several calls (issue 14: the 48B-dims parts at 128k
# need more H200 time than one call or one session lends). Runs `gpu_drift.py` on PART with the
# study's fixed options, continuing the run directories carried in `drift-carry/runs/` (the last
# call's, or the committed in-progress folder under results/drift/), and sends them back as one
# tarball split into 7 MB parts. Usage on the device (carry .whl and drift-carry):
#   bash scripts/drift_resume_call.sh PART MINUTES [more gpu_drift.py options]
# e.g. `bash scripts/drift_resume_call.sh 48b-bf16 9.3`; here: `bash scripts/drift_unpack.sh`.
set -o pipefail
PART=${1:?part, e.g. 48b-bf16}
MINUTES=${2:?wall minutes for gpu_drift.py}
shift 2
source scripts/device_setup.sh
export PYTHONUNBUFFERED=1
mkdir -p /tmp/d
if [ -d drift-carry/runs ]; then cp -r drift-carry/runs /tmp/d/; fi
# A call killed at its limit returns what is under $OUT: every 20 s a snapshot of /tmp/d goes to
# $OUT/snap (the one before it kept in $OUT/snap.old until the new one is whole), so the prompts
# finished before a kill come back; drift_unpack.sh takes the newest whole one and refits.
snapshot() {
  rm -rf "$OUT/snap.new" && mkdir -p "$OUT/snap.new"
  (cd /tmp/d && tar czf - .) | split -b 7000000 - "$OUT/snap.new/d.part." || return
  rm -rf "$OUT/snap.old"; [ -d "$OUT/snap" ] && mv "$OUT/snap" "$OUT/snap.old"
  mv "$OUT/snap.new" "$OUT/snap"
}
(while sleep 20; do snapshot; done) &
SNAP=$!
python3 scripts/gpu_drift.py --out /tmp/d --parts "$PART" --prompts 16 --length-48b 131072 \
  --max-minutes "$MINUTES" --resume "$@" 2>&1 | tee "$OUT/log.txt"
kill "$SNAP" 2>/dev/null; wait "$SNAP" 2>/dev/null
(cd /tmp/d && tar czf - .) | split -b 7000000 - "$OUT/d.part."
rm -rf "$OUT/snap" "$OUT/snap.old" "$OUT/snap.new"
