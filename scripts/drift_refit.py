"""Refit committed drift campaign folders from their checkpoints (no model, no GPU).

Usage: python scripts/drift_refit.py results/drift/h200-48b-fp32w-128k [more folders]
Rewrites each folder's runs/<part>/ summaries (`evalkit drift --report-only`), its summary.json and
note.md with this checkout's analysis; the note records the command and the commit.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path


def main(argv: list[str]) -> int:
    if not argv:
        print(__doc__.strip().splitlines()[2], file=sys.stderr)
        return 2
    from evalkit.drift.campaign import refit_campaign

    def git(*args: str) -> str:
        return subprocess.run(["git", *args], capture_output=True, text=True).stdout.strip()

    commit, dirty = git("rev-parse", "--short", "HEAD"), git("status", "--porcelain", "--", "evalkit")
    how = (
        f"`python scripts/drift_refit.py {' '.join(argv)}` on {time.strftime('%Y-%m-%d')}, commit {commit}"
        + (" (evalkit/ modified)" if dirty else "")
        + ": every figure recomputed from the checkpoints' per-prompt rows with that commit's analysis "
        "(fit points: evalkit/drift/fit_points.py); the measured rows are those of the runs"
    )
    for folder in argv:
        refit_campaign(Path(folder), how)
        print(f"refitted {folder}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
