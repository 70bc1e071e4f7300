#!/usr/bin/env bash
# One call on a two-H200 machine: train the KDA reference model v2 (GPU 0) and its Gated DeltaNet
# twin (GPU 1) side by side, same settings and data (issues 13 and 18). Each run keeps its bundle
# current under OUTDIR at every checkpoint, so a call cut at its limit still returns a model.
#   source scripts/device_setup.sh && bash scripts/train_reference_pair.sh OUTDIR [MINUTES] [SIZE]
# On a one-GPU machine the two runs share the GPU (slower; say so in the note).
set -u
OUT_DIR=${1:?usage: scripts/train_reference_pair.sh OUTDIR [MINUTES] [SIZE]}
MIN=${2:-9.1}
SIZE=${3:-4.7m}
mkdir -p "$OUT_DIR"
export PYTHONUNBUFFERED=1
GPUS=$(python3 -c "import torch; print(torch.cuda.device_count())")
G1=$(( GPUS >= 2 ? 1 : 0 ))
echo "GPUs: $GPUS; minutes $MIN; size $SIZE; start $(date +%T)"
for arch in kda gdn; do
  gpu=0; [ "$arch" = gdn ] && gpu=$G1
  CUDA_VISIBLE_DEVICES=$gpu TRITON_CACHE_DIR=/tmp/triton-$arch \
    python3 scripts/train_reference_model.py --arch "$arch" --size "$SIZE" --out "/tmp/rm-$arch" \
      --bundle "$OUT_DIR/$arch.tar.gz" --minutes "$MIN" --workers 11 --warm-helpers 3 \
      > "/tmp/rm-$arch.log" 2>&1 &
done
wait
for arch in kda gdn; do
  echo "== $arch"; grep -E "model:|kernel warm-up|training done|default suite|eval " "/tmp/rm-$arch.log" | tail -40
done
echo "end $(date +%T)"
