"""JSON rendering of the report (NaN/inf become null so any JSON reader accepts it)."""

from __future__ import annotations

import json
import math
from typing import Any


def _finite(obj: Any) -> Any:
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {k: _finite(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_finite(v) for v in obj]
    return obj


def render_json(report: dict[str, Any]) -> str:
    return json.dumps(_finite(report), indent=2, ensure_ascii=False, allow_nan=False) + "\n"
