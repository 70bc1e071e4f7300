"""The scan launch's executed instructions and warp-stall samples by SASS opcode, from Nsight
Compute's source page (run.sh writes it; h100/ncu-scan-sass.csv.gz is the H100's).
Usage: python3 results/bench/prefill-ncu/sass_mix.py [CSV or CSV.gz]"""

import collections
import csv
import gzip
import sys
from pathlib import Path

path = Path(sys.argv[1] if len(sys.argv) > 1 else Path(__file__).parent / "h100" / "ncu-scan-sass.csv.gz")
opener = gzip.open if path.suffix == ".gz" else open
with opener(path, "rt") as f:
    rows = list(csv.reader(f))
header = rows[1]
lines = [dict(zip(header, r)) for r in rows[2:] if len(r) == len(header)]


def num(x: str) -> float:
    try:
        return float(x.replace(",", ""))
    except ValueError:
        return 0.0


def opcode(src: str) -> str:
    words = src.split()
    op = words[1] if words and words[0].startswith("@") else (words[0] if words else "?")
    return op.split(".")[0]


instr = collections.Counter()
stalls = collections.Counter()
for d in lines:
    instr[opcode(d["Source"])] += num(d["Instructions Executed"])
    stalls[opcode(d["Source"])] += num(d["Warp Stall Sampling (All Samples)"])
total_i, total_s = sum(instr.values()), sum(stalls.values())
print(f"{len(lines)} SASS lines, {total_i:,.0f} warp instructions executed, {total_s:,.0f} stall samples")
print("| opcode | instructions | stall samples |\n|---|---:|---:|")
for op, n in instr.most_common(16):
    print(f"| {op} | {n / total_i:.1%} | {stalls[op] / total_s:.1%} |")
