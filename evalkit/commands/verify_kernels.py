"""`evalkit verify-kernels`: the fp32-twin check over random shapes, with counts.

Every launch runs a 16-bit (fp16 or bf16) decode or prefill on random inputs and random pool
contents, checked against the fp32-pool build on an exactly widened copy of the touched rows
(`evalkit.kernels.twin_check`). On --device cpu the Triton kernels run in Triton's interpreter
(small shapes, slow); on cuda they run compiled. --self-test also runs a deliberately truncating
build and requires the check to catch every launch of it.

Half the launches use a Gated DeltaNet gate (one decay per head, broadcast over K as the GDN
layers feed it: `evalkit.model.qwen3_next.gdn.as_kda_gate`), the other half KDA's per-channel
gate."""

from __future__ import annotations

import argparse
import os
import random
import sys
import time


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--launches",
        type=int,
        default=None,
        help="number of checked launches (default: 10000 on cuda, 20 on cpu)",
    )
    parser.add_argument(
        "--device",
        choices=["cuda", "cpu"],
        default=None,
        help="cuda (compiled Triton) or cpu (Triton interpreter); default: cuda if available",
    )
    parser.add_argument("--seed", type=int, default=None, help="random seed (default: fresh)")
    parser.add_argument(
        "--self-test",
        action="store_true",
        help="also run a truncating (wrong) build and require every launch of it to fail",
    )
    parser.add_argument("--json", default=None, help="also write the counts to this JSON file")


def _shape(rng: random.Random, device: str) -> dict:
    """A random launch. On cuda the head shapes come from a short list (every new (H, K, V, dtype)
    combination costs a Triton compile); sizes, slots, lengths and contents vary freely."""
    if device == "cuda":
        H, K, V = rng.choice([(32, 128, 128), (48, 128, 128), (4, 64, 64)])  # KDA/GDN real, GDN Hv=48, small
        B, lengths = rng.randint(1, 64), [rng.randint(1, 300) for _ in range(rng.randint(1, 4))]
        model_dtype = "bfloat16"
    else:
        H, K, V = rng.choice([1, 2]), rng.choice([16, 32]), rng.choice([16, 32])
        B, lengths = rng.randint(1, 4), [rng.randint(1, 80) for _ in range(rng.randint(1, 2))]
        model_dtype = rng.choice(["float32", "bfloat16"])
    return {
        "op": rng.choice(["decode", "decode", "prefill"]),
        "gate": rng.choice(["kda", "gdn"]),
        "dtype": rng.choice(["fp16", "bf16"]),
        "H": H, "K": K, "V": V, "B": B, "lengths": lengths, "model_dtype": model_dtype,
    }  # fmt: skip


def _launch_inputs(s: dict, rows: int, model_dtype, device: str, gen):
    """Random kernel inputs for launch `s`; a GDN launch gets one gate input per head."""
    from evalkit.kernels.testing import kda_inputs
    from evalkit.model.qwen3_next.gdn import as_kda_gate

    H, K, V = s["H"], s["K"], s["V"]
    x = kda_inputs(rows, H, K, V, dtype=model_dtype, device=device, generator=gen)
    if s["gate"] == "gdn":
        x.g_raw, x.dt_bias = as_kda_gate(x.g_raw[..., 0], x.dt_bias.view(H, K)[:, 0], K)
    return x


def run_launches(n: int, device: str, *, seed: int | None, rounding: str = "rtne", progress=None):
    """Run n checked launches of random shapes; returns the TwinChecker with its counts."""
    import torch

    from evalkit.kernels import STATE_DTYPES
    from evalkit.kernels.testing import random_cu_seqlens, random_pool
    from evalkit.kernels.twin_check import TwinChecker

    rng = random.Random(seed)
    gen = torch.Generator(device=device).manual_seed(rng.randrange(2**31)) if seed is not None else None
    checker = TwinChecker(rounding=rounding)
    checker.gate_counts = {"kda": 0, "gdn": 0}
    for i in range(n):
        s = _shape(rng, device)
        dt, mdt = STATE_DTYPES[s["dtype"]], getattr(torch, s["model_dtype"])
        H, K, V = s["H"], s["K"], s["V"]
        checker.gate_counts[s["gate"]] += 1

        if s["op"] == "decode":
            B = s["B"]
            x = _launch_inputs(s, B, mdt, device, gen)
            pool = random_pool(B + 3, H, K, V, dt, device=device, generator=gen)
            slots = torch.randperm(B + 3, generator=gen, device=device)[:B].to(torch.int32)
            checker.kda_decode(*x.args(), pool, slots)
        else:
            lengths = s["lengths"]
            N = len(lengths)
            x = _launch_inputs(s, sum(lengths), mdt, device, gen)
            pool = random_pool(N + 2, H, K, V, dt, device=device, generator=gen)
            slots = torch.randperm(N + 2, generator=gen, device=device)[:N].to(torch.int32)
            init = torch.rand(N, generator=gen, device=device) < 0.5
            intra = torch.bfloat16 if rng.random() < 0.25 else None
            checker.kda_prefill(
                *x.args(),
                pool,
                slots,
                random_cu_seqlens(lengths, device=device),
                init,
                intra_chunk_dtype=intra,
            )
        if progress is not None:
            progress(i + 1)
    return checker


def _table(title: str, checker) -> str:
    rows = [f"{title}", f"  {'launch':<16}{'checked':>9}{'passed':>9}{'failed':>9}"]
    for key, st in sorted(checker.stats.items()):
        rows.append(f"  {key:<16}{st.checked:>9}{st.passed:>9}{st.failed:>9}")
    rows.append(
        f"  {'total':<16}{checker.checked:>9}{checker.passed:>9}{checker.checked - checker.passed:>9}"
    )
    return "\n".join(rows)


def main(args: argparse.Namespace) -> int:
    import json

    from evalkit.errors import InputError

    device = args.device
    if device is None:
        import torch

        device = "cuda" if torch.cuda.is_available() else "cpu"
    if device == "cpu":
        if "triton" in sys.modules and os.environ.get("TRITON_INTERPRET") != "1":
            raise InputError(
                "--device cpu needs TRITON_INTERPRET=1 before triton is imported; run it "
                "as: TRITON_INTERPRET=1 evalkit verify-kernels --device cpu"
            )
        os.environ["TRITON_INTERPRET"] = "1"  # before triton's first import: its interpreter mode
    else:
        import torch

        if not torch.cuda.is_available():
            raise InputError("--device cuda requested but no CUDA device is visible")
    n = args.launches if args.launches is not None else (10000 if device == "cuda" else 20)
    if n < 1:
        raise InputError("--launches must be at least 1")

    from tqdm import tqdm

    t0 = time.time()
    with tqdm(total=n, desc="twin check", unit="launch") as bar:
        checker = run_launches(n, device, seed=args.seed, progress=lambda i: bar.update(1))
    print(_table(f"fp32-twin check on {device} ({n} launches, {time.time() - t0:.1f} s)", checker))
    gates = checker.gate_counts
    print(f"  gates: {gates['kda']} KDA (per channel), {gates['gdn']} GDN (per head)")
    result = {
        "device": device,
        "launches": n,
        "seed": args.seed,
        "summary": checker.summary(),
        "checked": checker.checked,
        "passed": checker.passed,
        "gate_launches": checker.gate_counts,
    }
    ok = checker.passed == checker.checked

    if args.self_test:
        m = max(2, min(n, 20))
        with tqdm(total=m, desc="truncating build", unit="launch") as bar:
            wrong = run_launches(m, device, seed=args.seed, rounding="rtz", progress=lambda i: bar.update(1))
        print(_table(f"self-test: deliberately truncating build ({m} launches; every one must fail)", wrong))
        caught = wrong.checked - wrong.passed
        result["self_test"] = {"launches": m, "checked": wrong.checked, "caught": caught}
        ok = ok and caught == wrong.checked
        print(f"  the check caught {caught} of {wrong.checked} wrong launches")

    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=2)
    print("PASS" if ok else "FAIL")
    return 0 if ok else 1
