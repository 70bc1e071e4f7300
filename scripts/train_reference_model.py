#!/usr/bin/env python3
"""Train evalkit's reference model: a small pure-KDA Kimi-Linear LM that really uses its state.

The command line of `evalkit.refmodel` (its `cli` module says what a run does; `--help` too):
    python scripts/train_reference_model.py --out /tmp/refmodel --bundle $OUT/refmodel.tar.gz --minutes 9.25
    python scripts/train_reference_model.py --out /tmp/refmodel --device cpu --tiny --minutes 0.3
    python scripts/train_reference_model.py --install-from DIR_OR_BUNDLE
"""

from __future__ import annotations

import time

T0 = time.time()  # the budget counts from here, imports included

import os  # noqa: E402
import sys  # noqa: E402
from pathlib import Path  # noqa: E402

os.environ.setdefault("TQDM_DISABLE", "1")  # no progress bars (checkpoint writes, eval docs) in the log
try:
    import evalkit.refmodel  # noqa: F401
except ImportError:  # a checkout that is not installed (the GPU image)
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from evalkit.refmodel import runlog  # noqa: E402
from evalkit.refmodel.cli import main  # noqa: E402

if __name__ == "__main__":
    runlog.start_clock(T0)
    sys.exit(main(script=Path(__file__).resolve()))
