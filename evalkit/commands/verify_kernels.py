"""`evalkit verify-kernels`: the fp32-twin check over random shapes, with counts.

Every launch runs a decode or prefill that stores the state in a rounding format (fp16, bf16,
fp8, mN; round-to-nearest, truncation or stochastic rounding: `--formats`, default every one in
`twin_check.TWIN_FORMATS`) on random inputs and random pool contents, checked against the
fp32-pool build on an exactly widened copy of the touched rows (`evalkit.kernels.twin_check`).
On --device cpu the Triton kernels run in Triton's interpreter (small shapes, slow); on cuda they
run compiled. --self-test also runs deliberately wrong builds (each format with another rounding)
and requires the check to catch every launch of them.

A third of the launches use a Gated DeltaNet gate (one decay per head, broadcast over K as the GDN
layers feed it: `evalkit.model.qwen3_next.gdn.as_kda_gate`), a third KDA's per-channel gate, and a
third the Mamba2 SSD ops (`ssd_decode` / `ssd_prefill`: state [H, P=V, N=K], two B/C groups when
H allows; prefills of an odd total length through the split variant, counted as `ssd_prefill[split]`)."""

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
    parser.add_argument(
        "--formats",
        default=None,
        help="comma-separated state formats to check, e.g. fp16,fp8_e4m3,m3-rtz,bf16-sr "
        "(default: every storage and rounding)",
    )
    parser.add_argument("--json", default=None, help="also write the counts to this JSON file")


def _shape(rng: random.Random, device: str, formats: tuple[str, ...]) -> dict:
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
        "format": rng.choice(formats),
        "gate": rng.choice(["kda", "gdn", "ssd"]),
        "H": H, "K": K, "V": V, "B": B, "lengths": lengths, "model_dtype": model_dtype,
    }  # fmt: skip


def _stored_pool(rows: int, *, H: int, K: int, V: int, fmt, device: str, gen):
    """Random pool contents as earlier stores of this format would have left them."""
    import dataclasses

    import torch

    from evalkit.kernels import round_to_format
    from evalkit.kernels.testing import random_pool

    stored = dataclasses.replace(fmt, rounding="rtne", seed=0)
    return round_to_format(random_pool(rows, H, K, V, torch.float32, device=device, generator=gen), stored)


def _launch_inputs(s: dict, rows: int, model_dtype, device: str, gen):
    """Random kernel inputs for launch `s`; a GDN launch gets one gate input per head."""
    from evalkit.kernels.testing import kda_inputs
    from evalkit.model.qwen3_next.gdn import as_kda_gate

    H, K, V = s["H"], s["K"], s["V"]
    x = kda_inputs(rows, H, K, V, dtype=model_dtype, device=device, generator=gen)
    if s["gate"] == "gdn":
        x.g_raw, x.dt_bias = as_kda_gate(x.g_raw[..., 0], x.dt_bias.view(H, K)[:, 0], K)
    return x


def _positions(rows: int, *, device: str, gen):
    import torch

    return torch.randint(0, 2**31, (rows,), generator=gen, device=device)


def run_launches(
    n: int,
    device: str,
    *,
    seed: int | None,
    rounding: str | None = None,
    progress=None,
    formats: tuple[str, ...] | None = None,
):
    """Run n checked launches of random shapes and formats; returns the TwinChecker with its
    counts. `rounding` overrides the launches' rounding ('wrong': the self-test's wrong builds)."""
    import functools

    import torch

    from evalkit.kernels import parse_format
    from evalkit.kernels.testing import random_cu_seqlens
    from evalkit.kernels.twin_check import TWIN_FORMATS, TwinChecker

    formats = tuple(formats or TWIN_FORMATS)

    rng = random.Random(seed)
    gen = torch.Generator(device=device).manual_seed(rng.randrange(2**31)) if seed is not None else None
    checker = TwinChecker(rounding=rounding)
    checker.gate_counts = {"kda": 0, "gdn": 0, "ssd": 0}
    for i in range(n):
        s = _shape(rng, device, formats)
        fmt, mdt = parse_format(s["format"]), getattr(torch, s["model_dtype"])
        store = dict(fmt=fmt, sr_seed=rng.randrange(64))
        H, K, V = s["H"], s["K"], s["V"]
        checker.gate_counts[s["gate"]] += 1
        positions = functools.partial(_positions, device=device, gen=gen)
        if s["gate"] == "ssd":  # the Mamba2 pool is [S, H, P, N]: P = V, N = K
            pool_of = functools.partial(_stored_pool, H=H, K=V, V=K, fmt=fmt, device=device, gen=gen)
            _ssd_launch(checker, s, mdt, device, gen, pool_of, positions, store)
        elif s["op"] == "decode":
            pool_of = functools.partial(_stored_pool, H=H, K=K, V=V, fmt=fmt, device=device, gen=gen)
            B = s["B"]
            x = _launch_inputs(s, B, mdt, device, gen)
            pool = pool_of(B + 3)
            slots = torch.randperm(B + 3, generator=gen, device=device)[:B].to(torch.int32)
            checker.kda_decode(*x.args(), pool, slots, positions=positions(B), **store)
        else:
            pool_of = functools.partial(_stored_pool, H=H, K=K, V=V, fmt=fmt, device=device, gen=gen)
            lengths = s["lengths"]
            N = len(lengths)
            x = _launch_inputs(s, sum(lengths), mdt, device, gen)
            pool = pool_of(N + 2)
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
                positions=positions(N),
                **store,
            )
        if progress is not None:
            progress(i + 1)
    return checker


def _ssd_launch(checker, s: dict, mdt, device: str, gen, pool_of, positions, store: dict) -> None:
    """One checked Mamba2 SSD launch (decode or packed prefill) of shape `s`."""
    import torch

    from evalkit.kernels.testing import random_cu_seqlens, ssd_inputs

    H, P, N = s["H"], s["V"], s["K"]
    G = 2 if H % 2 == 0 else 1
    if s["op"] == "decode":
        B = s["B"]
        pool = pool_of(B + 3)
        slots = torch.randperm(B + 3, generator=gen, device=device)[:B].to(torch.int32)
        x = ssd_inputs(B, H, P, G, N, dtype=mdt, device=device, generator=gen)
        checker.ssd_decode(*x, pool, slots, positions=positions(B), **store)
        return
    lengths = s["lengths"]
    n = len(lengths)
    pool = pool_of(n + 2)
    slots = torch.randperm(n + 2, generator=gen, device=device)[:n].to(torch.int32)
    init = torch.rand(n, generator=gen, device=device) < 0.5
    x = ssd_inputs(sum(lengths), H, P, G, N, dtype=mdt, device=device, generator=gen)
    cu = random_cu_seqlens(lengths, device=device)
    # every other launch through the split variant (a state pass, then the outputs in parallel)
    variant = {"variant": "split"} if sum(lengths) % 2 else {}
    checker.ssd_prefill(*x, pool, slots, cu, init, positions=positions(n), **variant, **store)


def _table(title: str, checker) -> str:
    rows = [f"{title}", f"  {'launch':<30}{'checked':>9}{'passed':>9}{'failed':>9}"]
    for key, st in sorted(checker.stats.items()):
        rows.append(f"  {key:<30}{st.checked:>9}{st.passed:>9}{st.failed:>9}")
    rows.append(
        f"  {'total':<30}{checker.checked:>9}{checker.passed:>9}{checker.checked - checker.passed:>9}"
    )
    return "\n".join(rows)


def main(args: argparse.Namespace) -> int:
    import json

    from evalkit.errors import InputError

    if args.json and (os.path.isdir(args.json) or not os.path.isdir(os.path.dirname(args.json) or ".")):
        raise InputError(f"--json {args.json}: not a file in an existing folder")  # before the launches
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
    formats = None
    if args.formats:
        from evalkit.kernels import FormatError, parse_format

        try:
            formats = tuple(parse_format(f).name for f in args.formats.split(",") if f.strip())
        except FormatError as exc:
            raise InputError(f"--formats: {exc}") from None
        if not formats or any(parse_format(f).exact for f in formats):
            raise InputError("--formats: name formats that round (plain fp32 has nothing to check)")

    from tqdm import tqdm

    t0 = time.time()
    with tqdm(total=n, desc="twin check", unit="launch") as bar:
        checker = run_launches(n, device, seed=args.seed, progress=lambda i: bar.update(1), formats=formats)
    print(_table(f"fp32-twin check on {device} ({n} launches, {time.time() - t0:.1f} s)", checker))
    gates = checker.gate_counts
    print(
        f"  gates: {gates['kda']} KDA (per channel), {gates['gdn']} GDN (per head), "
        f"{gates['ssd']} Mamba2 SSD (per head)"
    )
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
            wrong = run_launches(
                m, device, seed=args.seed, rounding="wrong", progress=lambda i: bar.update(1), formats=formats
            )
        print(_table(f"self-test: deliberately wrong builds ({m} launches; every one must fail)", wrong))
        caught = wrong.checked - wrong.passed
        result["self_test"] = {"launches": m, "checked": wrong.checked, "caught": caught}
        ok = ok and caught == wrong.checked
        print(f"  the check caught {caught} of {wrong.checked} wrong launches")

    if args.json:
        try:
            with open(args.json, "w") as f:
                json.dump(result, f, indent=2)
        except OSError as exc:
            raise InputError(f"cannot write {args.json}: {exc.strerror or exc}") from None
    print("PASS" if ok else "FAIL")
    return 0 if ok else 1
