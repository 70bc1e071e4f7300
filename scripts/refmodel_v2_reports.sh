#!/usr/bin/env bash
# Paired reports of the reference model v2's H200 sweeps (issue 13), from the committed run
# directories (results/reference-model/h200/{short,long,ruler}/<arm>/):
#   reports/compare-<group>-fp32-vs-<arm>.{md,json}   evalkit compare (McNemar, NI, paired log-prob)
#   reports/positions-<group>-<arm>.{md,json}          item accuracy by answer position vs fp32
# (the GDN twin: scripts/gdn_twin_reports.sh).
#   bash scripts/refmodel_v2_reports.sh
set -eu
cd "$(dirname "$0")/.."
report() {  # sweep_dir out_dir group arms...
  local dir=$1 out=$2 group=$3; shift 3
  mkdir -p "$out"
  for arm in "$@"; do
    python -m evalkit compare "$dir/fp32" "$dir/$arm" --md "$out/compare-$group-fp32-vs-$arm.md" \
      --json "$out/compare-$group-fp32-vs-$arm.json" > /dev/null
    python scripts/position_report.py "$dir/fp32" "$dir/$arm" --out "$out/pos-tmp" > /dev/null
    mv "$out/pos-tmp/positions.md" "$out/positions-$group-$arm.md"
    mv "$out/pos-tmp/positions.json" "$out/positions-$group-$arm.json"
    rmdir "$out/pos-tmp"
  done
}
R=results/reference-model/h200
report "$R/short" "$R/reports" short fp16 bf16 m5 m4 m3
report "$R/long" "$R/reports" long fp16 bf16 m5 m4 m3
report "$R/ruler" "$R/reports" ruler fp16 bf16 m3 m3-rtz
# (the GDN twin's first attempt, results/reference-model-gdn/first-attempt: its run directories are in git
# history at 9926035; the trained twin's reports: scripts/gdn_twin_reports.sh)
echo "reports in $R/reports"
