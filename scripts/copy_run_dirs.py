"""Copy evalkit run directories into results/ without their prompt text.

A 32k-token question stores ~130 KB of prompt in samples.jsonl (`prompt`, as lm-eval's
--log_samples does); the committed runs keep `prompt_hash`, which is what `evalkit compare` pairs
on and what ties a sample to its regenerable prompt (same task, length, seed and tokenizer).

    python scripts/copy_run_dirs.py SRC_DIR... DEST_DIR
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path


def copy_run(src: Path, dest: Path) -> None:
    dest.mkdir(parents=True, exist_ok=True)
    for item in src.iterdir():
        if item.name == ".lock":
            continue
        if item.name == "samples.jsonl":
            with item.open() as fin, (dest / item.name).open("w") as fout:
                for line in fin:
                    if line.strip():
                        row = json.loads(line)
                        row.pop("prompt", None)
                        fout.write(json.dumps(row) + "\n")
        elif item.is_dir():
            copy_run(item, dest / item.name)
        else:
            shutil.copy2(item, dest / item.name)


def main(argv: list[str]) -> int:
    *sources, dest = argv
    for src in map(Path, sources):
        copy_run(src, Path(dest) / src.name)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
