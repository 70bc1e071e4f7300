"""`scripts/train_reference_model.py` imported as a module (once per test session), for the tests
of the script and of the model it produced."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "train_reference_model.py"


def load_script() -> ModuleType:
    if "train_reference_model" in sys.modules:
        return sys.modules["train_reference_model"]
    spec = importlib.util.spec_from_file_location("train_reference_model", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    sys.modules["train_reference_model"] = mod
    spec.loader.exec_module(mod)
    return mod
