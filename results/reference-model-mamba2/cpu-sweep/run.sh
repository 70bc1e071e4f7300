#!/usr/bin/env bash
# The Mamba2 reference model on the CPU (fp32 weights and activations: the state's format alone)
# on passkey at 8k, the retrieval cell its quick evaluation put in the 30-90% band (75% of 24;
# passkey at 4k was 100%), 100 questions, with the full-vs-chunked prefill factor as arms: X (a
# store every 2,048 prompt tokens, the default: 4 per prompt) against X@chunk=8192 (one store, at
# the prompt's end: every 8k prompt fits; a sweep runs all its arms at the largest arm's token
# budget, and at 65,536 the CPU path ran ~5x slower per sample). From the repository root (about
# 12 minutes on 2 idle cores):
#   bash results/reference-model-mamba2/cpu-sweep/run.sh
set -eu
python -m evalkit sweep --device cpu --model models/reference-model-mamba2 \
  --arms fp32,fp16,bf16,m3-rtz,fp16@chunk=8192,bf16@chunk=8192 \
  --tasks passkey --lengths 8k --limit 100 --margin 0.05 --no-progress \
  --out results/reference-model-mamba2/cpu-sweep
