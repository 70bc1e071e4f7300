#!/usr/bin/env bash
# Paired reports of the reference model v2's H200 sweeps (issue 13), from the committed run
# directories (results/reference-model/h200/{short,long,ruler}/<arm>/):
#   reports/compare-<group>-fp32-vs-<arm>.{md,json}   evalkit compare (McNemar, NI, paired log-prob)
#   reports/positions-<group>-<arm>.{md,json}          item accuracy by answer position vs fp32
# and the same for the GDN twin's sweep (results/reference-model-gdn/h200-sweep).
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
report results/reference-model-gdn/h200-sweep results/reference-model-gdn/reports short fp16 bf16 m4 m3 m3-rtz
echo "reports in $R/reports and results/reference-model-gdn/reports"
