"""Build a test checkpoint folder once per set of arguments, safely under concurrent test sessions."""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

MARKER = "evalkit_tiny.json"


def build_once(final: Path, stamp: dict[str, Any], build: Callable[[Path], None]) -> Path:
    """`final` as `build(folder)` writes it, reused when a build with the same `stamp` (the
    arguments, written to MARKER) is already there. The build happens next to the target and is
    then moved in: concurrent test sessions never see half a build."""
    marker = final / MARKER
    if marker.is_file() and json.loads(marker.read_text()) == stamp:
        return final
    path = final.with_name(f"{final.name}.building-{os.getpid()}")
    if path.exists():
        shutil.rmtree(path)
    path.mkdir(parents=True)
    build(path)
    (path / MARKER).write_text(json.dumps(stamp))
    if final.exists():
        if marker.is_file() and json.loads(marker.read_text()) == stamp:  # someone else just built it
            shutil.rmtree(path)
            return final
        shutil.rmtree(final)
    os.replace(path, final)
    return final
