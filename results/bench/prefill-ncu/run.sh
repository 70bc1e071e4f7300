#!/usr/bin/env bash
# One device step, issue 42 goal 2: where the fp32 prefill form's time goes (0.44x FLA's chunk_kda
# at 32k on the H200). Per-kernel CUDA times of one 32k prefill, ours and FLA's
# (bench_prefill.py --parts kernels), then Nsight Compute's full counter set for the fp32 form's
# scan, output and wu launches at 32k (second call of two), printed per kernel and, for the scan,
# per SASS line (stall reasons where the time goes). Clocks left alone (--clock-control none).
# Usage (device, repository root, carrying .whl): bash results/bench/prefill-ncu/run.sh OUT
set -u
OUT=${1:?usage: run.sh OUT}
source scripts/device_setup.sh
mkdir -p "$OUT"
timeout 150 python3 scripts/bench_prefill.py --out /tmp/kernels --parts kernels > "$OUT/kernels.log" 2>&1
echo "bench_prefill kernels exit $?"
cp /tmp/kernels/bench_prefill.json "$OUT/kernels.json"
timeout 240 ncu --clock-control none --kernel-name regex:"scan_kernel|output_kernel|wu_kernel" \
  --launch-skip 3 --launch-count 3 --set full --import-source yes -o /tmp/prefill -f \
  python3 results/bench/prefill-ncu/profile_prefill.py 32768 > "$OUT/ncu.log" 2>&1
echo "ncu exit $?"
ncu --import /tmp/prefill.ncu-rep --page details --print-details all > "$OUT/ncu-details.txt" 2>&1
ncu --import /tmp/prefill.ncu-rep --page source --csv --print-source sass --kernel-name scan_kernel \
  > "$OUT/ncu-scan-sass.csv" 2>&1
echo "printed: $(wc -l < "$OUT/ncu-details.txt") detail lines, $(wc -l < "$OUT/ncu-scan-sass.csv") scan SASS lines"
grep -E "^  [a-z_]+kernel|Duration|Registers Per|Achieved Occupancy|Memory Throughput|L2 Cache Throughput|Compute \(SM\) Throughput" "$OUT/ncu-details.txt" | head -n 40
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv,noheader
