# Sourced by the report scripts (refmodel_v2_reports.sh, gdn_twin_reports.sh): one function that
# writes the paired reports of a committed sweep's arms against its fp32 run.
#   sweep_reports SWEEP_DIR OUT_DIR GROUP ARM...   -> OUT_DIR/compare-GROUP-fp32-vs-ARM.{md,json}
# With POSITIONS=1 also OUT_DIR/positions-GROUP-ARM.{md,json} (item accuracy by answer position).
sweep_reports() {
  local dir=$1 out=$2 group=$3; shift 3
  mkdir -p "$out"
  for arm in "$@"; do
    python -m evalkit compare "$dir/fp32" "$dir/$arm" --md "$out/compare-$group-fp32-vs-$arm.md" \
      --json "$out/compare-$group-fp32-vs-$arm.json" > /dev/null
    if [ "${POSITIONS:-0}" = 1 ]; then
      python scripts/position_report.py "$dir/fp32" "$dir/$arm" --out "$out/pos-tmp" > /dev/null
      mv "$out/pos-tmp/positions.md" "$out/positions-$group-$arm.md"
      mv "$out/pos-tmp/positions.json" "$out/positions-$group-$arm.json"
      rmdir "$out/pos-tmp"
    fi
  done
}
