"""Compress the samples of finished run directories for keeping: samples.jsonl -> samples.jsonl.gz.

Every reader that goes through the store (`evalkit compare`, `sweep --report-only`, the reports,
`load_run`) reads the compressed file as it was; the run becomes read-only (a resume is refused
until it is gunzipped). A run without `finished_at` in its manifest is left alone.

    python scripts/compress_run_samples.py [--min-bytes N] DIR...

Searches each DIR for run directories (a manifest.json beside a samples.jsonl of at least N
bytes, default 100,000) and prints what it compressed with the sizes before and after.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from evalkit.store import MANIFEST, SAMPLES, compress_samples


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--min-bytes", type=int, default=100_000)
    ap.add_argument("dirs", nargs="+", type=Path)
    args = ap.parse_args()
    before = after = 0
    for root in args.dirs:
        for samples in sorted(root.rglob(SAMPLES)):
            run = samples.parent
            if samples.stat().st_size < args.min_bytes or not (run / MANIFEST).exists():
                continue
            if not json.loads((run / MANIFEST).read_text()).get("finished_at"):
                print(f"skipped (not finished): {run}")
                continue
            size = samples.stat().st_size
            packed = compress_samples(run)
            before, after = before + size, after + packed.stat().st_size
            print(f"{run}: {size:,} -> {packed.stat().st_size:,} bytes")
    print(f"total: {before:,} -> {after:,} bytes")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
