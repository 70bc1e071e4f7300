"""Random inputs for tests, the twin check and benchmarks (fresh each call unless a generator is given).

The gate inputs are spread so that per-token decays range from ~1 (no forgetting) to strong
forgetting (exp(g) ~ 1e-3 per token), which exercises the chunked prefill's overflow guards."""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass
class KdaInputs:
    q: torch.Tensor
    k: torch.Tensor
    v: torch.Tensor
    g_raw: torch.Tensor
    beta_raw: torch.Tensor
    A_log: torch.Tensor
    dt_bias: torch.Tensor

    def args(self) -> tuple:
        return (self.q, self.k, self.v, self.g_raw, self.beta_raw, self.A_log, self.dt_bias)

    def rows(self, idx) -> KdaInputs:
        """The same layer parameters with a subset of token rows (e.g. one decode step)."""
        return KdaInputs(
            self.q[idx],
            self.k[idx],
            self.v[idx],
            self.g_raw[idx],
            self.beta_raw[idx],
            self.A_log,
            self.dt_bias,
        )


def kda_inputs(
    n: int,
    H: int,
    K: int,
    V: int,
    *,
    dtype=torch.float32,
    device="cpu",
    generator: torch.Generator | None = None,
    strong_decay: float = 0.2,
) -> KdaInputs:
    """n rows (tokens or sequences) of q/k/v/g_raw [n, H, K|V], beta_raw [n, H]; A_log [H], dt_bias [H*K].

    Drawn directly on `device` (pass a generator of that device for reproducibility).
    `strong_decay` is the fraction of channels whose gate input is pushed up (fast forgetting)."""
    f32 = dict(dtype=torch.float32, device=device, generator=generator)

    def rnd(*shape, scale=1.0):
        return torch.randn(*shape, **f32) * scale

    g_raw = rnd(n, H, K, scale=2.0) - 3.0 + (torch.rand(n, H, K, **f32) < strong_decay).float() * 6.0
    t = KdaInputs(
        q=rnd(n, H, K).to(dtype), k=rnd(n, H, K).to(dtype), v=rnd(n, H, V).to(dtype), g_raw=g_raw.to(dtype),
        beta_raw=rnd(n, H, scale=1.5).to(dtype),
        A_log=torch.log(torch.rand(H, **f32) * 3.0 + 0.5), dt_bias=rnd(H * K, scale=0.5),
    )  # fmt: skip
    return t


def ssd_inputs(
    n: int, H: int, P: int, G: int, N: int, *, dtype=torch.float32, device="cpu", generator=None
) -> tuple:
    """n rows of Mamba2 SSD inputs in the ops' argument order: x [n, H, P], dt_raw [n, H],
    B/C [n, G, N] (model dtype), A_log/dt_bias/D [H] (fp32). dt_raw is spread so per-token decays
    exp(dt A) range from ~1 to ~1e-3."""
    f32 = dict(dtype=torch.float32, device=device, generator=generator)
    return (
        torch.randn(n, H, P, **f32).to(dtype),
        (torch.randn(n, H, **f32) * 2.0 - 1.0).to(dtype),
        torch.randn(n, G, N, **f32).to(dtype),
        torch.randn(n, G, N, **f32).to(dtype),
        torch.log(torch.rand(H, **f32) * 3.0 + 0.5),
        torch.randn(H, **f32) * 0.5,
        torch.randn(H, **f32),
    )


def random_pool(
    S: int,
    H: int,
    K: int,
    V: int,
    dtype: torch.dtype,
    *,
    device="cpu",
    generator: torch.Generator | None = None,
    scale: float = 0.5,
) -> torch.Tensor:
    """A state pool with random contents (as if earlier tokens had filled it), in `dtype`."""
    return (torch.randn(S, H, K, V, generator=generator, device=device) * scale).to(dtype)


def random_cu_seqlens(lengths: list[int], device="cpu") -> torch.Tensor:
    cu = [0]
    for n in lengths:
        cu.append(cu[-1] + n)
    return torch.tensor(cu, dtype=torch.int32, device=device)


def run_module_under_interpreter(path: str, timeout: int = 900) -> tuple[int, str]:
    """Run one pytest module in a fresh process with TRITON_INTERPRET=1 from the start.

    Triton's CPU interpreter only works when the variable is set before `triton` is first imported
    (its standard library is built at that import), which a shared test process cannot promise."""
    import os
    import re
    import subprocess
    import sys

    env = {**os.environ, "TRITON_INTERPRET": "1"}
    # conftest files above the module's folder are not its own (a stray /tmp/conftest.py broke a
    # module written under /tmp once)
    here = os.path.dirname(os.path.abspath(path))
    r = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--confcutdir", here, path],
        env=env, capture_output=True, text=True, timeout=timeout,
    )  # fmt: skip
    out = r.stdout[-6000:] + "\n" + r.stderr[-3000:]
    m = re.search(r"(\d+) passed", r.stdout)
    executed = int(m.group(1)) if m else 0
    out += f"\n[interpreter run: {executed} tests passed]"
    if r.returncode == 0 and executed == 0:  # everything skipped: the module checked nothing
        return 1, out + "\nno test executed under the interpreter"
    return r.returncode, out


def run_json_script(code: str, *args: str, interpret: bool = True, timeout: int = 900) -> dict:
    """Run `python -c code args` in a fresh process (TRITON_INTERPRET=1 when `interpret`, see
    `run_module_under_interpreter`) and return the JSON object its last stdout line prints.

    The script must say what it executed: a non-empty list under "executed" (e.g. the Triton
    kernels that ran interpreted, the checks it made). A failed run, a run that printed no result
    or one that executed nothing raises AssertionError: an exit code alone proves nothing."""
    import json
    import os
    import subprocess
    import sys

    env = {**os.environ, "TRITON_INTERPRET": "1" if interpret else "0"}
    r = subprocess.run(
        [sys.executable, "-c", code, *args], env=env, capture_output=True, text=True, timeout=timeout
    )
    tail = r.stdout[-2000:] + "\n" + r.stderr[-3000:]
    if r.returncode != 0:
        raise AssertionError(f"the subprocess failed (exit {r.returncode}):\n{tail}")
    lines = r.stdout.strip().splitlines()
    try:
        result = json.loads(lines[-1]) if lines else None
    except json.JSONDecodeError:
        result = None
    if not isinstance(result, dict) or not result.get("executed"):
        raise AssertionError(f"the subprocess reported no result with a non-empty 'executed' list:\n{tail}")
    return result


def check_rounded_like_reference(
    stored: torch.Tensor, exact: torch.Tensor, *, rel_tol: float = 1e-5
) -> float:  # noqa: E501
    """A 16-bit pool against the float64 reference state: every element within half a 16-bit ulp
    of the exact value plus the fp32 computation error (rel_tol x max|exact|), and nearly all of
    them equal to the exact value rounded to nearest even (a truncating store matches only about
    half). Returns the fraction equal to RTNE(exact); raises AssertionError otherwise."""
    exact = exact.double()
    dt = stored.dtype
    mant = {torch.float16: 10, torch.bfloat16: 7}[dt]
    mag = exact.abs().clamp_min(torch.finfo(dt).tiny)
    ulp = torch.exp2(torch.floor(torch.log2(mag)) - mant)
    bound = 0.5 * ulp + rel_tol * exact.abs().max()
    err = (stored.double() - exact).abs()
    worst = float((err / bound).max())
    assert worst <= 1.0 + 1e-9, f"stored state off by {worst:.2f}x the allowed bound"
    same = float((stored == exact.to(dt)).double().mean())
    assert same >= 0.98, f"only {same:.3f} of the stored elements equal RTNE(reference)"
    return same


def format_step(x: torch.Tensor, fmt) -> torch.Tensor:
    """The grid step of storage format `fmt` at the values x (float64): 2^(max(e, emin) - N)."""
    from .formats import parse_format
    from .rounding import TARGETS

    fmt = parse_format(fmt)
    emin = TARGETS[fmt.storage][0] - 127
    e = torch.floor(torch.log2(x.double().abs().clamp_min(1e-300))).clamp_min(emin)
    return torch.exp2(e - fmt.bits)


def check_stored_like_reference(
    stored: torch.Tensor, ref: torch.Tensor, fmt, *, rel_tol: float = 1e-5, min_same: float = 0.98
) -> float:
    """A pool stored in format `fmt` against the float64 reference's state stored the same way
    (a float64 pool written through the same format): every element within one grid step of the
    reference plus the fp32 computation error (rel_tol x max|ref|), and at least `min_same` of them
    equal (they differ only where the fp32 error crosses a rounding threshold; another rounding
    rule, or other random bits, matches far fewer). Returns the fraction equal."""
    from .formats import parse_format

    fmt = parse_format(fmt)
    got, ref = stored.double(), ref.double()
    bound = format_step(ref, fmt) + rel_tol * ref.abs().max()
    worst = float(((got - ref).abs() / bound).max())
    assert worst <= 1.0 + 1e-9, f"{fmt.name}: stored state off by {worst:.2f}x the allowed bound"
    same = float((got == ref).double().mean())
    assert same >= min_same, f"{fmt.name}: only {same:.3f} of the stored elements equal the reference's"
    return same
