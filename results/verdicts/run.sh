#!/usr/bin/env bash
# Issue 12 on one H200, one device call (<= 9.5 min): the state formats checked on the GPU's Triton
# (store == rounding oracle bit for bit; twin check of every format, wrong builds caught), the
# precision sweep of the reference model (results/verdicts/h200-sweep/run.sh: 2k/8k/32k and 128k, ten arms with
# the gold log-probability), then an A/A replicate of the fp32 arm at 8k (same questions, a second
# process: exact-match discordance and paired log-prob difference must both be exactly 0).
# Everything is packed into OUTDIR/verdicts.tar.gz (the device returns few files).
#   bash results/verdicts/run.sh OUTDIR
set -u
OUT_DIR=${1:?usage: results/verdicts/run.sh OUTDIR}
W=/tmp/verdicts
mkdir -p "$W" "$OUT_DIR"
export PYTHONUNBUFFERED=1
( timeout 200 python3 -m pytest -q -p no:cacheprovider tests/test_kernels_formats.py -k bit_for_bit > "$W/store_oracle.log" 2>&1
  echo "store == oracle rc=$? $(tail -1 "$W/store_oracle.log")"
  timeout 240 python3 -m evalkit verify-kernels --device cuda --launches 600 --self-test --seed 1 \
    --json "$W/verify_formats.json" > "$W/verify_formats.log" 2>&1
  echo "twin check rc=$? $(tail -2 "$W/verify_formats.log" | tr '\n' ' ')" ) &
bash results/verdicts/h200-sweep/run.sh "$W/sweep" "${2:-64}" "${3:-24}"
wait
timeout 60 python3 -m evalkit run --device cuda --arm fp32 --tasks passkey,niah_single_1 --lengths 8k \
  --limit "${2:-64}" --no-progress --out "$W/aa-fp32-8k" > "$W/aa.log" 2>&1
echo "A/A replicate rc=$?"
tar -czf "$OUT_DIR/verdicts.tar.gz" -C /tmp verdicts
ls -la "$OUT_DIR"
