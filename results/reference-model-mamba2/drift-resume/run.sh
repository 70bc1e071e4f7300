#!/usr/bin/env bash
# One device call (issue 41): continue the Mamba2 reference model's 32k drift study
# (`../h200/drift-32k/`: prefill mode 16 of 16 prompts, decode mode stopped by its budget at 6 of 16)
# through scripts/drift_resume_call.sh, which skips the prompts already done.
# The study's identity holds the model's path and config hash as they were when it started: the
# checkpoint sits at the same path with the declared context it had then (4096; raised to 131072
# since, for the retrieval cells). The model has no attention layer and no position embedding, so
# that field changes no arithmetic; the resume refuses any other difference. The code changed since
# (--allow-source-change; each call's source hash is in the manifest's resumes).
# Here, first: mkdir -p drift-carry && cp -r results/reference-model-mamba2/h200/drift-32k/runs drift-carry/
#              && gunzip drift-carry/runs/*/samples.jsonl.gz
# Device (repository root, carrying .whl; drift-carry travels as an untracked folder):
#   bash results/reference-model-mamba2/drift-resume/run.sh MINUTES
# Here, after: bash scripts/drift_unpack.sh FILES_AT results/reference-model-mamba2/h200/drift-32k
set -eu
MINUTES=${1:?wall minutes for gpu_drift.py}
mkdir -p /tmp/m2w/train
rm -rf /tmp/m2w/train/model && cp -r models/reference-model-mamba2 /tmp/m2w/train/model
sed -i 's/"max_position_embeddings": 131072/"max_position_embeddings": 4096/' /tmp/m2w/train/model/config.json
bash scripts/drift_resume_call.sh ref-fp32 "$MINUTES" --ref-model /tmp/m2w/train/model --ref-length 32768 \
  --allow-source-change
nvidia-smi --query-gpu=name --format=csv,noheader
