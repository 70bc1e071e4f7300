"""On the GPU: the re-reading decode builds (DecodeTile.reload) against the same tiles without it,
bit for bit (outputs and stored states), for each pool format at B = 1, 128 and 512; the fp32
twin of each 16-bit launch too (the twin rule: same outputs, the state rounded the format's way).
The interpreter's tests show the same in CI; this is the compiled code's check (the compiler may
contract products into FMAs differently in the two builds). Prints one JSON line.
Usage (device, repository root): python3 results/bench/decode-reload/bits_check.py
(--smoke: tiny shapes on the CPU interpreter, TRITON_INTERPRET=1: checks the script only)"""

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "scripts"))
import bench_kernels as bk  # noqa: E402
import torch  # noqa: E402

from evalkit.kernels import parse_format, round_to_format  # noqa: E402
from evalkit.kernels.kda_decode.wrapper import decode_config, kda_decode  # noqa: E402
from evalkit.kernels.twin_check import bit_equal  # noqa: E402

smoke = "--smoke" in sys.argv
if smoke:
    bk.smoke_mode()
rows = []
for name in ("fp32", "fp16", "bf16", "fp16-sr", "bf16-rtz"):
    for B in (1, 4) if smoke else (1, 128, 512):
        x, pool, slots = bk.decode_case(B, name)
        kw = bk.store_kw(name, B)
        fmt = parse_format(name)
        tile = decode_config(fmt, bk.V)._replace(reload=True)
        a, b = pool.clone(), pool.clone()
        twin = pool.to(torch.float32)
        o_a = kda_decode(*x.args(), a, slots, config=tile, **kw)
        o_b = kda_decode(*x.args(), b, slots, config=tile._replace(reload=False), **kw)
        o_t = kda_decode(*x.args(), twin, slots, config=tile)
        idx = slots.long()
        stored = round_to_format(twin[idx], fmt, sr_seed=kw["sr_seed"], positions=kw["positions"])
        twin_state = bit_equal(a[idx], stored)
        rows.append({"format": name, "B": B, "tile": tile.label(), "outputs_equal": bit_equal(o_a, o_b),
                     "states_equal": bit_equal(a, b), "twin_outputs": bit_equal(o_a, o_t),
                     "twin_state": twin_state})  # fmt: skip
ok = all(r["outputs_equal"] and r["states_equal"] and r["twin_outputs"] and r["twin_state"] for r in rows)
device = "cpu (interpreter)" if smoke else torch.cuda.get_device_name()
print(json.dumps({"all_equal": ok, "device": device, "rows": rows}))
