#!/usr/bin/env bash
# One warm device machine (an H100 came; all 27 layers of the 48B model fit no H100, so its first 12,
# 9 KDA + 3 MLA), issue 42 goal 3: a 125k-token prompt at the default store points (every 2,048
# tokens) with the MLA context expanded once per forward (this tree) against the build before
# (BEFORE, a commit: its code copied beside the tree and installed editable for that step), then this
# tree again with the 16k-store-point arm, then the fp16 state with both schedules (same numbers?).
# Usage (device, repository root, carrying .whl): bash results/bench/mla-expand-once-h100/run.sh OUT BEFORE_DIR
# where BEFORE_DIR holds `git archive BEFORE evalkit kernels tasks scripts pyproject.toml setup.py README.md`
# (made on the host; each step below was one device call, in this order).
set -u
OUT=${1:?usage: run.sh OUT BEFORE_DIR}
BEFORE_DIR=${2:?usage: run.sh OUT BEFORE_DIR}
lp() { timeout 240 python3 scripts/bench_long_prompt.py --layers 12 "$@"; }
source scripts/device_setup.sh
mkdir -p "$OUT/h100" "$OUT/before" "$OUT/after2" "$OUT/fp16"
lp --out "$OUT/h100" --state fp32 --rows "pieces,chunk per forward" > "$OUT/h100/log.txt" 2>&1
(cd "$BEFORE_DIR" && python3 -m pip install -q --no-index --no-deps --no-build-isolation -e . \
  && lp --out "$OUT/before" --state fp32 --rows pieces > "$OUT/before/log.txt" 2>&1)
source scripts/device_setup.sh  # this tree installed again
lp --out "$OUT/after2" --state fp32 --rows "pieces,16k store points" > "$OUT/after2/log.txt" 2>&1
lp --out "$OUT/fp16" --state fp16 --rows "pieces,chunk per forward" > "$OUT/fp16/log.txt" 2>&1
nvidia-smi --query-gpu=name --format=csv,noheader
