"""On the GPU: the fp32 prefill form with candidate tiles (a JSON dict of STREAM_TILES["fp32"]
entries, argv[1], e.g. '{"scan": [32, 4, 2, false], "presplit": [true]}': the wu launch writing
Kd as its tf32x3 halves for the scan) against the current defaults, bit for bit (outputs
and stored states), over packed sequences with partial chunks and single tokens, a varlen batch,
head dims that are not powers of two, an fp16 pool with stochastic rounding on store and an
intra-chunk bf16 state (bench_prefill.py's sweep compares one 32k sequence). The interpreter's
tests check the presplit build bit for bit in CI; this is the compiled code's check. Prints one
JSON line.
Usage (device, repository root): python3 results/bench/prefill-presplit/bits_check.py TILES_JSON
(--smoke: tiny shapes on the CPU interpreter, TRITON_INTERPRET=1: checks the script only)"""

import json
import os
import sys

smoke = "--smoke" in sys.argv
if smoke:
    os.environ["TRITON_INTERPRET"] = "1"

import torch  # noqa: E402

from evalkit.kernels.kda_prefill import wrapper as pw  # noqa: E402
from evalkit.kernels.testing import kda_inputs, random_cu_seqlens, random_pool  # noqa: E402
from evalkit.kernels.twin_check import bit_equal  # noqa: E402

DEV = "cpu" if smoke else "cuda"
CANDIDATE = {k: tuple(v) for k, v in json.loads(next(a for a in sys.argv[1:] if a.startswith("{"))).items()}
g = torch.Generator().manual_seed(0)
varlen = [int(n) for n in torch.randint(500, 1300, (37,), generator=g)]
CASES = [  # (label, lengths, H, K, V, input dtype, pool dtype, fmt, intra-chunk dtype)
    ("partial chunks", [130, 1, 64, 2000], 32, 128, 128, torch.bfloat16, torch.float32, None, None),
    ("varlen 37", varlen, 32, 128, 128, torch.bfloat16, torch.float32, None, None),
    ("K 96, V 80", [300, 17], 4, 96, 80, torch.bfloat16, torch.float32, None, None),
    ("fp16-sr pool", [700, 33], 32, 128, 128, torch.bfloat16, torch.float16, "fp16-sr", None),
    ("bf16 intra-chunk", [700, 33], 32, 128, 128, torch.bfloat16, torch.float32, None, torch.bfloat16),
]
if smoke:
    CASES = [(c[0], [70, 1], 2, 32, 32, *c[5:]) for c in CASES[:1] + CASES[3:4]]


def run(x, pool0, slots, cu, init, fmt, intra, tiles):
    saved = pw.STREAM_TILES["fp32"]
    pw.STREAM_TILES["fp32"] = {**saved, **tiles}
    try:
        pool = pool0.clone()
        kw = dict(fmt=fmt, sr_seed=7, positions=torch.zeros(len(slots), dtype=torch.int64, device=DEV))
        o = pw.kda_prefill(*x.args(), pool, slots, cu, init, intra_chunk_dtype=intra, variant="stream", **kw)
        return o, pool
    finally:
        pw.STREAM_TILES["fp32"] = saved


rows = []
for label, lengths, H, K, V, dtype, pool_dtype, fmt, intra in CASES:
    x = kda_inputs(sum(lengths), H, K, V, dtype=dtype, device=DEV)
    N = len(lengths)
    pool0 = random_pool(N, H, K, V, pool_dtype, device=DEV)
    slots = torch.arange(N, dtype=torch.int32, device=DEV)
    init = torch.arange(N, device=DEV) % 3 != 1  # some sequences start from zeros
    cu = random_cu_seqlens(lengths)
    with torch.inference_mode():
        o_new, s_new = run(x, pool0, slots, cu, init, fmt, intra, CANDIDATE)
        o_old, s_old = run(x, pool0, slots, cu, init, fmt, intra, {})
    rows.append({"case": label, "tokens": sum(lengths), "sequences": N,
                 "outputs_equal": bit_equal(o_new, o_old), "states_equal": bit_equal(s_new, s_old),
                 "finite": bool(torch.isfinite(o_new).all())})  # fmt: skip
    if not smoke:
        torch.cuda.empty_cache()
ok = all(r["outputs_equal"] and r["states_equal"] and r["finite"] for r in rows)
device = "cpu (interpreter)" if smoke else torch.cuda.get_device_name()
defaults = {k: list(pw.STREAM_TILES["fp32"][k]) for k in CANDIDATE}
print(json.dumps({"all_equal": ok, "device": device, "defaults": defaults, "candidate": CANDIDATE, "rows": rows}))
