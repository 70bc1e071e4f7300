#!/usr/bin/env bash
# Fill .whl/ (git-ignored) with the wheels of scripts/device_wheels.txt for the lent GPU machine,
# which has no package index: binary wheels for CPython 3.12 on x86_64 where PyPI has them, built
# here (`pip wheel`) for the pure-Python sdists. Then carry `.whl` in a device call and start its
# command with `source scripts/device_setup.sh`. Usage: bash scripts/device_wheels.sh
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p .whl
grep -q '^/.whl/' .git/info/exclude 2>/dev/null || echo /.whl/ >> .git/info/exclude
PLAT=(--platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64
      --platform manylinux2014_x86_64 --platform manylinux1_x86_64)
for spec in $(grep -v '^#' scripts/device_wheels.txt); do
  if ! python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
      "${PLAT[@]}" -d .whl "$spec" 2>/dev/null; then
    python3 -m pip wheel -q --no-deps -w .whl "$spec"  # an sdist: pure Python, built here
  fi
done
du -sh .whl
