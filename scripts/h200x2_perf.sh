#!/usr/bin/env bash
# One call on a two-H200 machine (<= 9.5 min), bounded parts:
#   A. data parallel: the same evaluation of the reference model on one GPU and on two
#      (scripts/bench_data_parallel.py: speedup, samples identical)                    (issue 15)
#   B. then side by side, one GPU each:
#      GPU 0: MLA prefill, SDPA's memory-efficient path vs the flash path, attention alone and a
#             128k prompt through the engine at Kimi-Linear-48B dims (scripts/bench_mla_prefill.py)
#      GPU 1: the GDN kernels vs FLA (decode, prefill) and a real-size random-weights engine run
#             at Qwen3.5-35B-A3B dims, all arms (scripts/bench_gdn.py)                (issue 18)
# Everything lands in OUTDIR/perf.tar.gz.
#   bash scripts/h200x2_perf.sh OUTDIR
set -u
OUT_DIR=${1:?usage: h200x2_perf.sh OUTDIR}
W=/tmp/perf
mkdir -p "$W" "$OUT_DIR"
export PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
t0=$(date +%s)
python3 -c "import torch; print('GPUs', torch.cuda.device_count())"
timeout 210 python3 scripts/bench_data_parallel.py --out "$W/data-parallel" > "$W/data-parallel.log" 2>&1
echo "A. data parallel rc=$? after $(( $(date +%s) - t0 )) s"; tail -5 "$W/data-parallel.log"
CUDA_VISIBLE_DEVICES=0 timeout 300 python3 scripts/bench_mla_prefill.py --out "$W/mla-prefill" > "$W/mla.log" 2>&1 &
CUDA_VISIBLE_DEVICES=1 timeout 300 python3 scripts/bench_gdn.py --out "$W/bench-gdn" --skip correctness \
  --engine-arch qwen3.5-35b-a3b --budget-s 220 > "$W/bench-gdn.log" 2>&1 &
wait
echo "B. done after $(( $(date +%s) - t0 )) s"; tail -3 "$W/mla.log"; tail -3 "$W/bench-gdn.log"
tar -czf "$OUT_DIR/perf.tar.gz" -C /tmp perf
