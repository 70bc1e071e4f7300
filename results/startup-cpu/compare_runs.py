"""Two run directories' samples equal field by field (`timings` aside) and their manifests equal but
for the keys that name one run (times, command, code, hardware); exit 1 otherwise.

    python results/startup-cpu/compare_runs.py BEFORE_RUN_DIR AFTER_RUN_DIR"""

import json
import sys

RUN_SPECIFIC = {"started_at", "finished_at", "command", "source_hash", "git_commit", "git_dirty", "hardware"}


def rows(run_dir: str) -> dict:
    out = {}
    with open(f"{run_dir}/samples.jsonl") as f:
        for line in f:
            r = json.loads(line)
            r.pop("timings", None)
            out[(r["task"], r["doc_id"], r["length"])] = r
    return out


def main(a: str, b: str) -> int:
    ra, rb = rows(a), rows(b)
    if ra.keys() != rb.keys():
        print("different questions")
        return 1
    diff = [k for k in ra if ra[k] != rb[k]]
    with open(f"{a}/manifest.json") as fa, open(f"{b}/manifest.json") as fb:
        ma, mb = json.load(fa), json.load(fb)
    mdiff = [k for k in sorted(set(ma) | set(mb)) if k not in RUN_SPECIFIC and ma.get(k) != mb.get(k)]
    print(f"{len(ra)} samples, {len(diff)} differ (timings aside); manifest keys differing: {mdiff}")
    return 1 if diff or mdiff else 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:3]))
