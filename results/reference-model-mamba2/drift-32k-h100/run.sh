#!/usr/bin/env bash
# One device call (issue 41): the Mamba2 reference model's 32k drift study whole in one call — 16
# prompts x 32,378 tokens, prefill and decode modes, fp16 / bf16 against fp32 with the A/A floor —
# now that decode mode steps the SSD state in one launch per block (about 2 s a prompt; the per-token
# launches of `../h200/drift-32k/` took 60 s and stopped at 6 of 16 prompts).
# Device (repository root, carrying .whl): bash results/reference-model-mamba2/drift-32k-h100/run.sh
# Then here: copy note.md, summary.json and runs/ from the call's tarball into this folder and
# gzip runs/*/samples.jsonl.
source scripts/device_setup.sh >/dev/null
mkdir -p "$OUT"
python3 scripts/gpu_drift.py --out /tmp/fresh --parts ref-fp32 --ref-model models/reference-model-mamba2 \
  --prompts 16 --ref-length 32768 --max-minutes 6 > "$OUT/log.txt" 2>&1
echo "rc $?"; tail -5 "$OUT/log.txt"
(cd /tmp/fresh && tar czf - .) | split -b 7000000 - "$OUT/f.part."
