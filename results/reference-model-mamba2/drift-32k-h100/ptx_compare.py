"""Offline (no GPU; Triton's own ptxas): the sm_90 PTX of the engine's SSD decode step and of
drift's one-launch SSD kernel at this model's head dims (H 4, G 4, P 64, N 64; fp32 model and pool),
compared by their float instructions, for this folder's README.
Usage (repository root):
  python results/reference-model-mamba2/drift-32k-h100/ptx_compare.py > /tmp/p.txt
  && mv /tmp/p.txt results/reference-model-mamba2/drift-32k-h100/ptx_compare.txt"""

import collections
import os
import re
import subprocess

os.environ.setdefault("TRITON_DEFAULT_FP_FUSION", "1")
from evalkit.kernels import compile_check as cc  # noqa: E402

FLOAT_OP = re.compile(r"\s*(?:@%p\d+ )?((?:fma|mul|add|sub|ex2|lg2|div|rcp|max|min|neg|abs|sqrt)\.[\w.]*f32)\s")  # noqa: E501

def git(*args: str) -> str:
    return subprocess.run(["git", *args], capture_output=True, text=True).stdout.strip()


commit, dirty = git("rev-parse", "--short", "HEAD"), bool(git("status", "--porcelain"))
print(f"commit {commit}, {'dirty' if dirty else 'clean'} tree")
dims = {"H": 4, "G": 4, "P": 64, "N": 64}
builds = {"decode step": cc.ssd_decode_build("fp32", model="fp32", **dims),
          "one-launch": cc.ssd_recurrent_build("fp32", model="fp32", **dims)}  # fmt: skip
counts = {}
for name, build in builds.items():
    counts[name] = collections.Counter(m.group(1) for m in map(FLOAT_OP.match, build.ptx.splitlines()) if m)
    print(f"{name}: {sorted(counts[name].items())}")
sigs = [cc.summation_signature(b.ttgir) for b in builds.values()]
print(f"same f32 instruction counts: {counts['decode step'] == counts['one-launch']}; "
      f"same summation signature: {sigs[0] == sigs[1]}")  # fmt: skip
