#!/usr/bin/env bash
# The state formats on the GPU (Triton as installed there, e.g. 3.6 on the H200), one command:
#   1. the Triton store/load == the rounding oracle, bit for bit, on random fp32 bit patterns (19 formats)
#   2. the fp32-twin check over random launches of every format, and the wrong builds caught
#   3. decode bandwidth of the new formats next to fp32/fp16/bf16
# Usage on the device, from the repository root: bash scripts/gpu_check_formats.sh OUTDIR   (~6-8 minutes)
set -u
OUT_DIR=${1:?usage: gpu_check_formats.sh OUTDIR}
mkdir -p "$OUT_DIR"
export PYTHONUNBUFFERED=1
python3 -m pip install --no-deps --no-build-isolation -e . -q > "$OUT_DIR/install.log" 2>&1
timeout 150 python3 -m pytest -q -p no:cacheprovider tests/test_kernels_formats.py -k bit_for_bit \
  > "$OUT_DIR/store_oracle.log" 2>&1
echo "1. store == oracle: rc=$? $(tail -1 "$OUT_DIR/store_oracle.log")"
timeout 300 python3 -m evalkit verify-kernels --device cuda --launches 1500 --self-test --seed 1 \
  --json "$OUT_DIR/verify_formats.json" > "$OUT_DIR/verify_formats.log" 2>&1
echo "2. twin check: rc=$? $(tail -1 "$OUT_DIR/verify_formats.log")"
timeout 150 python3 scripts/bench_kernels.py --out "$OUT_DIR/bench" --budget-s 120 \
  --skip correctness,prefill,twin,prefill_detail,decode_sweep \
  --formats fp32,fp16,bf16,fp8_e4m3,fp8_e5m2,m7,fp16-sr,bf16-rtz > "$OUT_DIR/bench.log" 2>&1
echo "3. decode bench: rc=$?"
