#!/usr/bin/env bash
# Sizes of the installs: base (no extras), [lmeval], [engine] (torch CPU wheel first).
set -euo pipefail
REPO=${REPO:-$(git -C "$(dirname "$0")" rev-parse --show-toplevel)}
W=/tmp/isz/dist
rm -rf $W && mkdir -p $W
python3 -m pip wheel -q --no-deps $REPO -w $W
WHL=$(ls $W/evalkit_state-*.whl)
for kind in base lmeval engine; do
  V=/tmp/isz/venv-$kind
  rm -rf $V && python3 -m venv $V
  $V/bin/python -m pip install -q --upgrade pip >/dev/null
  start=$(date +%s)
  case $kind in
    base)   $V/bin/pip install -q --find-links /work/main/.whl "$WHL" ;;
    lmeval) $V/bin/pip install -q --find-links /work/main/.whl "$WHL[lmeval]" ;;
    engine) $V/bin/pip install -q torch==2.13.0 && $V/bin/pip install -q --find-links /work/main/.whl "$WHL[engine]" ;;
  esac
  end=$(date +%s)
  SP=$($V/bin/python -c 'import site; print(site.getsitepackages()[0])')
  size=$(du -sk "$SP" | cut -f1)
  n=$($V/bin/pip list --format=freeze 2>/dev/null | wc -l)
  has=$($V/bin/python -c 'import importlib.util as u; print(",".join(m for m in ("torch","triton","transformers","lm_eval","datasets","pyarrow","pandas","sklearn") if u.find_spec(m)))')
  $V/bin/pip list --format=freeze > /tmp/isz/freeze-$kind.txt
  echo "{\"install\": \"$kind\", \"site_packages_kib\": $size, \"distributions\": $n, \"seconds\": $((end-start)), \"present\": \"$has\"}" | tee -a /tmp/isz/sizes.jsonl
  # the base install's commands
  if [ $kind = base ]; then
    $V/bin/evalkit compare $REPO/results/compare-example/fp32 $REPO/results/compare-example/fp16 > /tmp/isz/base-compare.txt 2>&1; echo "compare rc=$?" | tee -a /tmp/isz/base-checks.txt
  fi
done
