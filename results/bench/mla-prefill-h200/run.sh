#!/usr/bin/env bash
# One call on a two-H200 machine (<= 9.5 min), bounded parts:
#   A. data parallel: the same evaluation of the reference model on one GPU and on two
#      (scripts/bench_data_parallel.py: speedup, samples identical)                    (issue 15)
#   B. then side by side, one GPU each:
#      GPU 0: MLA prefill, SDPA's memory-efficient path vs the flash path, attention alone and a
#             128k prompt through the engine at Kimi-Linear-48B dims (scripts/bench_mla_prefill.py)
#      GPU 1: the GDN kernels vs FLA (decode, prefill) and a real-size random-weights engine run
#             at Qwen3.5-35B-A3B dims, all arms (scripts/bench_gdn.py)                (issue 18)
# On a one-GPU machine part A is skipped (it needs two) and B's two parts run one after the other.
# Everything lands in OUTDIR/perf.tar.gz.
#   bash results/bench/mla-prefill-h200/run.sh OUTDIR
set -u
OUT_DIR=${1:?usage: results/bench/mla-prefill-h200/run.sh OUTDIR}
W=/tmp/perf
mkdir -p "$W" "$OUT_DIR"
export PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
t0=$(date +%s)
GPUS=$(python3 -c "import torch; print(torch.cuda.device_count())")
echo "GPUs: $GPUS"
if [ "$GPUS" -ge 2 ]; then
  timeout 210 python3 scripts/bench_data_parallel.py --out "$W/data-parallel" > "$W/data-parallel.log" 2>&1
  echo "A. data parallel rc=$? after $(( $(date +%s) - t0 )) s"; tail -5 "$W/data-parallel.log"
  G1=1
else
  echo "A. data parallel skipped: one GPU"
  G1=0
fi
CUDA_VISIBLE_DEVICES=0 timeout 280 python3 scripts/bench_mla_prefill.py --out "$W/mla-prefill" > "$W/mla.log" 2>&1 &
[ "$GPUS" -ge 2 ] || wait
CUDA_VISIBLE_DEVICES=$G1 timeout 280 python3 scripts/bench_gdn.py --out "$W/bench-gdn" --skip correctness \
  --engine-arch qwen3.5-35b-a3b --budget-s 200 > "$W/bench-gdn.log" 2>&1 &
wait
echo "B. done after $(( $(date +%s) - t0 )) s"; tail -3 "$W/mla.log"; tail -3 "$W/bench-gdn.log"
tar -czf "$OUT_DIR/perf.tar.gz" -C /tmp perf
