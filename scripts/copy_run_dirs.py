"""Copy evalkit run directories into results/ without their prompt text.

A 32k-token question stores ~130 KB of prompt in samples.jsonl (`prompt`, as lm-eval's
--log_samples does); the committed runs keep `prompt_hash`, which is what `evalkit compare` pairs
on and what ties a sample to its regenerable prompt (same task, length, seed and tokenizer).

    python scripts/copy_run_dirs.py [--drop-token-arrays] SRC_DIR... DEST_DIR

`--drop-token-arrays` also drops the reference answer's per-token log-probabilities and margins
(~75% of a long-answer sample); each sample keeps their sums (`gold_logprob`, `gold_min_margin`),
the answer's and the generation's token ids, scores and per-item flags: everything `evalkit
compare` and the position report read.
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

TOKEN_ARRAYS = ("gold_token_logprobs", "gold_margins")


def copy_run(src: Path, dest: Path, drop: tuple[str, ...] = ()) -> None:
    dest.mkdir(parents=True, exist_ok=True)
    for item in src.iterdir():
        if item.name == ".lock":
            continue
        if item.name == "samples.jsonl":
            with item.open() as fin, (dest / item.name).open("w") as fout:
                for line in fin:
                    if line.strip():
                        row = json.loads(line)
                        for key in ("prompt", *drop):
                            row.pop(key, None)
                        fout.write(json.dumps(row) + "\n")
        elif item.is_dir():
            copy_run(item, dest / item.name, drop)
        else:
            shutil.copy2(item, dest / item.name)


def main(argv: list[str]) -> int:
    drop = TOKEN_ARRAYS if "--drop-token-arrays" in argv else ()
    *sources, dest = [a for a in argv if a != "--drop-token-arrays"]
    for src in map(Path, sources):
        copy_run(src, Path(dest) / src.name, drop)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
