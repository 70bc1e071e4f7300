#!/usr/bin/env bash
# One device call (H200) after merging this session's branches: the GPU-only tests of the code paths
# that moved (the MLA kernels through the dispatcher, the coupled sampler on CUDA, NemotronH's engine
# paths, the twin check), the fp32-twin check over every state format with its self-test (the SSD
# ops included), and the Mamba2 SSD kernels against FLA's scalar-decay kernels (scripts/bench_ssd.py).
# Usage (device, repository root, carrying .whl with pytest and hypothesis): bash results/gpu-checks-h200/run.sh $OUT
set -u
OUT=${1:?usage: run.sh OUT}
W=/tmp/gpu-checks && rm -rf $W && mkdir -p $W
source scripts/device_setup.sh
export PYTHONPYCACHEPREFIX=/tmp/pycache
timeout 100 python3 -m pytest -q -p no:cacheprovider tests/test_engine_gpu_paths.py tests/test_mla_prefill_triton.py \
  tests/test_kernels_twin.py tests/test_coupled_sampling.py tests/test_nemotron_h_gpu_paths.py > $W/pytest-gpu.txt 2>&1
echo "pytest exit $?" >> $W/status.txt
timeout 45 python3 -m evalkit verify-kernels --device cuda --self-test --launches 1000 --json $W/verify.json > $W/verify.txt 2>&1
echo "verify-kernels exit $?" >> $W/status.txt
timeout 130 python3 scripts/bench_ssd.py --out $W/bench-ssd --budget-s 100 > $W/bench-ssd.log 2>&1
echo "bench_ssd exit $?" >> $W/status.txt
tar czf $OUT/gpu-checks.tgz -C $W .
cat $W/status.txt; tail -3 $W/pytest-gpu.txt
