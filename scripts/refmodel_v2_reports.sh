#!/usr/bin/env bash
# Paired reports of the reference model v2's H200 sweeps (issue 13), from the committed run
# directories (results/reference-model/h200/{short,long,ruler}/<arm>/):
#   reports/compare-<group>-fp32-vs-<arm>.{md,json}   evalkit compare (McNemar, NI, paired log-prob)
#   reports/positions-<group>-<arm>.{md,json}          item accuracy by answer position vs fp32
# (the GDN twin: scripts/gdn_twin_reports.sh).
#   bash scripts/refmodel_v2_reports.sh
set -eu
cd "$(dirname "$0")/.."
source scripts/sweep_reports.sh
report() { POSITIONS=1 sweep_reports "$@"; }
R=results/reference-model/h200
report "$R/short" "$R/reports" short fp16 bf16 m5 m4 m3
report "$R/long" "$R/reports" long fp16 bf16 m5 m4 m3
report "$R/ruler" "$R/reports" ruler fp16 bf16 m3 m3-rtz
# (the GDN twin's first attempt, results/reference-model-gdn/first-attempt: its run directories are in git
# history at 9926035; the trained twin's reports: scripts/gdn_twin_reports.sh)
echo "reports in $R/reports"
