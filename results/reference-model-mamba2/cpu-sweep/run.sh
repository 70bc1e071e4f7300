#!/usr/bin/env bash
# The Mamba2 reference model on the CPU (fp32 weights and activations: the state's format alone)
# on the cells its quick evaluation put in or near the 30-90% band past 2k: passkey and copy_list
# (decode-heavy) at 4k and 8k, 100 questions each, with the full-vs-chunked prefill factor as arms:
# X (a store every 2,048 prompt tokens, the default), X@chunk=65536 (one store, at the prompt's
# end) and bf16@chunk=256. From the repository root (about 40 minutes on 2 cores):
#   bash results/reference-model-mamba2/cpu-sweep/run.sh
set -eu
python -m evalkit sweep --device cpu --model models/reference-model-mamba2 \
  --arms fp32,fp16,bf16,m3-rtz,fp16@chunk=65536,bf16@chunk=65536,bf16@chunk=256 \
  --tasks passkey,copy_list --lengths 4k,8k --limit 100 --margin 0.05 --no-progress \
  --out results/reference-model-mamba2/cpu-sweep
