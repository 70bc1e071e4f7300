#!/usr/bin/env bash
# Make the checkout runnable on a lent GPU machine that has torch/triton/transformers but no
# package index: install the wheels carried in .whl/ (lm-eval and its pure-Python dependencies,
# fla-core for the FLA peer; fetched here with `pip download`/`pip wheel`, see DEVELOPERS.md) into
# /tmp/site, then evalkit itself (editable, no build isolation: setuptools is in the image).
# Usage on the device: `source scripts/device_setup.sh` (exports PYTHONPATH).
set -e
if ls .whl/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
  export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
fi
python3 -m pip install -q --no-index --no-deps --no-build-isolation -e . 2>&1 | grep -v -i warning || true
python3 -c "import evalkit, evalkit.kernels, evalkit.tasks, torch; print('evalkit ready; torch', torch.__version__, 'cuda', torch.cuda.is_available())"
set +e
