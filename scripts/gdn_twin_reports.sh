#!/usr/bin/env bash
# Paired reports (evalkit compare: McNemar mid-p/exact, non-inferiority, paired CI, paired
# log-probability) of the side-by-side H200 sweeps of issue 18, from the committed run directories:
#   results/reference-model-gdn/h200/{retrieval,short}/<arm>/   the Gated DeltaNet twin
#   results/reference-model/h200/retrieval/<arm>/               the KDA reference model v2
# (passkey and niah_single_1 at 8k/16k/32k, the same 100 questions per cell for both models).
#   bash scripts/gdn_twin_reports.sh
set -eu
cd "$(dirname "$0")/.."
source scripts/sweep_reports.sh
report() { sweep_reports "$@"; }
G=results/reference-model-gdn/h200
K=results/reference-model/h200
report "$G/retrieval" "$G/reports" retrieval fp16 bf16 m4 m3 fp8_e4m3 m3-rtz
report "$G/short" "$G/reports" short fp16 bf16
report "$K/retrieval" "$K/reports" retrieval fp16 bf16 m4 m3 fp8_e4m3 m3-rtz
python scripts/gdn_kda_side_by_side.py > "$G/side-by-side.md"
echo "reports in $G/reports and $K/reports; side by side in $G/side-by-side.md"
