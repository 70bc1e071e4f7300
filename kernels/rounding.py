"""The rounding oracle: what a `StateFormat` store does to an fp32 state, bit for bit, in torch.

The Triton kernels (`triton_common.store_state`), the CPU path, the float64 reference and the
fp32-twin check all round through this definition, so one function says what every arm means.

Every format is rounded by one integer algorithm on the fp32 bit pattern (no float arithmetic,
so the GPU, Triton's CPU interpreter and torch agree exactly):
- the magnitude keeps N explicit mantissa bits (fp16 10, bf16 7, fp8_e4m3 3, fp8_e5m2 2, mN N);
  the dropped low bits decide the rounding: "rtne" ties to even, "rtz" drops them, "sr" adds
  uniform random bits below the kept mantissa and then drops them (rounds up with probability
  equal to the dropped fraction: unbiased);
- below a storage's smallest normal value (fp16 2^-14, e4m3 2^-6, e5m2 2^-14) the grid is the
  storage's subnormal grid (fp16: multiples of 2^-24), rounded the same three ways. fp16
  subnormals are kept, not flushed: fp16-rtne equals torch's (IEEE) conversion everywhere, and SR
  on subnormals uses the same grid (where a store would drop more than 31 bits, i.e. fp16 below
  2^-32, e5m2 below 2^-24, e4m3 below 2^-17, the rounding-up probability is resolved to 2^-31).
  bf16 and mN keep fp32's exponent: their subnormals are fp32's, rounded in place (exactly what
  torch does for bf16);
- overflow: fp16 is IEEE (rtne/sr round past 65504 to inf; rtz stays at 65504 unless the input
  is inf); fp8 saturates: e4m3fn to +-448 and e5m2 to +-57344, inf included; bf16/mN overflow to
  inf like IEEE. NaN stays NaN (fp16 0x7E00, bf16 0x7FC0, fp8 0x7F, with the input's sign for
  fp16/fp8; mN keeps the input's NaN bits).

Stochastic rounding's random bits are a counter-based hash (lowbias32, uint32 arithmetic) of
(format seed, launch seed, the sequence position of the store, the element's index within the
[H, K, V] state): reproducible, and batch-invariant since the pool slot is never hashed. Two
sequences storing at the same position of the same layer use the same bits; each sequence on its
own sees independent, unbiased rounding from store to store."""

from __future__ import annotations

import torch

from .formats import StateFormat, parse_format

MASK32 = 0xFFFFFFFF

# per storage: (fp32-biased exponent of the smallest normal, largest finite magnitude code,
#               NaN code, saturating, code width in bits)
TARGETS: dict[str, tuple[int, int, int, bool, int]] = {
    "fp32": (1, 0x7F7FFFFF, 0x7FC00000, False, 32),
    "bf16": (1, 0x7F7F, 0x7FC0, False, 16),
    "fp16": (113, 0x7BFF, 0x7E00, False, 16),
    "fp8_e4m3": (121, 0x7E, 0x7F, True, 8),
    "fp8_e5m2": (113, 0x7B, 0x7F, True, 8),
}
_CODE_DTYPE = {32: torch.int32, 16: torch.int16, 8: torch.uint8}
# Elements rounded per pass: the int64 bit arithmetic keeps ~15 temporaries of 8 bytes an element
# (a whole B = 512 pool at 48B dims at once took ~75 GiB), so larger states go a slice of leading
# rows at a time; the rounding is elementwise, so the slices give the same codes.
ROUND_CHUNK_ELEMENTS = 1 << 22


# ---------------------------------------------------------------------------------- random bits
def lowbias32_int(x: int) -> int:
    """lowbias32 (Chris Wellons' 32-bit integer hash) on a Python int: the host side of the key."""
    x &= MASK32
    x ^= x >> 16
    x = (x * 0x7FEB352D) & MASK32
    x ^= x >> 15
    x = (x * 0x846CA68B) & MASK32
    x ^= x >> 16
    return x


def _mul32(x: torch.Tensor, c: int) -> torch.Tensor:
    """(x * c) mod 2^32 for int64 x in [0, 2^32) without int64 overflow (two 16-bit halves of c)."""
    lo = x * (c & 0xFFFF)
    hi = ((x * (c >> 16)) & 0xFFFF) << 16
    return (lo + hi) & MASK32


def lowbias32(x: torch.Tensor) -> torch.Tensor:
    """lowbias32 on an int64 tensor holding uint32 values."""
    x = x & MASK32
    x = x ^ (x >> 16)
    x = _mul32(x, 0x7FEB352D)
    x = x ^ (x >> 15)
    x = _mul32(x, 0x846CA68B)
    return x ^ (x >> 16)


def sr_key(fmt_seed: int, launch_seed: int) -> int:
    """The per-launch key of the random bits: a hash of the format's seed and the launch's seed
    (the engine passes the layer index)."""
    return lowbias32_int((fmt_seed & MASK32) ^ lowbias32_int(launch_seed))


def random_bits(key: int, positions: torch.Tensor, n_elements: int) -> torch.Tensor:
    """uint32 random bits (int64 tensor [*positions.shape, n_elements]) of the stores at
    `positions`: lowbias32(element ^ lowbias32(position ^ key))."""
    row = lowbias32((positions.to(torch.int64) & MASK32) ^ key)
    elem = torch.arange(n_elements, dtype=torch.int64, device=positions.device)
    return lowbias32(elem ^ row[..., None])


# ---------------------------------------------------------------------------------- rounding
def _round_codes(x: torch.Tensor, fmt: StateFormat, rand: torch.Tensor | None) -> torch.Tensor:
    """fp32 x -> int64 codes of the storage (magnitude code | sign), the kernels' algorithm."""
    emin, max_code, nan_code, saturate, width = TARGETS[fmt.storage]
    n = fmt.bits
    d = 23 - n
    u = x.contiguous().view(torch.int32).to(torch.int64) & MASK32
    sign = u >> 31
    a = u & 0x7FFFFFFF
    e = a >> 23
    e1 = e.clamp_min(1)
    sub = e1 < emin  # below the storage's smallest normal: its subnormal grid
    m = (a & 0x7FFFFF) | ((e > 0).to(torch.int64) << 23)
    mm = torch.where(sub, m, a)
    ss = torch.where(sub, d + emin - e1, torch.full_like(e, d))
    if fmt.rounding == "sr":
        mm = mm >> (ss - 31).clamp(0, 31)  # resolve tiny values' probability to 2^-31
        ss = ss.clamp_max(31)
    else:
        ss = ss.clamp_max(25)  # m < 2^24: 25 dropped bits already round everything to 0
    q = mm >> ss
    low = mm - (q << ss)
    if fmt.rounding == "rtne":
        rbit = (mm >> (ss - 1)) & 1
        rest = mm - ((mm >> (ss - 1)) << (ss - 1))
        up = rbit & ((rest != 0).to(torch.int64) | (q & 1))
    elif fmt.rounding == "rtz":
        up = torch.zeros_like(q)
    else:
        up = (low + (rand >> (32 - ss))) >> ss
    code = q + up - torch.where(sub, 0, (emin - 1) << n)
    is_inf = a == 0x7F800000
    if saturate:
        code = code.clamp_max(max_code)
    elif fmt.storage == "fp16":
        limit = torch.where(is_inf | (fmt.rounding != "rtz"), max_code + 1, max_code)
        code = torch.minimum(code, limit)  # rtne/sr overflow to inf; rtz stays finite
    if fmt.storage == "fp32":
        out = (code << d) | (sign << 31)
        return torch.where(x.isnan(), u, out)
    out = code | (sign << (width - 1))
    if fmt.storage == "bf16":
        return torch.where(x.isnan(), nan_code, out)
    return torch.where(x.isnan(), nan_code | (sign << (width - 1)), out)


def _round_in_slices(x: torch.Tensor, fmt: StateFormat, sr_seed: int, positions) -> torch.Tensor:
    """round_to_format over slices of x's leading rows (each with its rows' positions)."""
    rows = max(1, ROUND_CHUNK_ELEMENTS // (x.numel() // x.shape[0]))
    if positions is not None:
        positions = torch.as_tensor(positions, device=x.device).expand(x.shape[:-3])
    parts = []
    for i in range(0, x.shape[0], rows):
        pos = None if positions is None else positions[i : i + rows]
        parts.append(round_to_format(x[i : i + rows], fmt, sr_seed=sr_seed, positions=pos))
    return torch.cat(parts)


def round_to_format(
    x: torch.Tensor,
    fmt: StateFormat | str,
    *,
    sr_seed: int = 0,
    positions: torch.Tensor | None = None,
) -> torch.Tensor:
    """The stored form of state `x` ([..., H, K, V], rounded to fp32 first if wider) in
    `fmt.pool_dtype`. Stochastic rounding needs `positions` (shape x.shape[:-3]: the sequence
    position of each state's store) and `sr_seed` (the launch's seed, e.g. the layer index)."""
    fmt = parse_format(fmt)
    x = x.to(torch.float32)
    if fmt.exact:
        return x.clone()
    sr = fmt.rounding == "sr"
    if x.numel() > ROUND_CHUNK_ELEMENTS and x.dim() > (3 if sr else 1) and x.shape[0] > 1:
        return _round_in_slices(x, fmt, sr_seed, positions if sr else None)
    rand = None
    if sr:
        if positions is None:
            raise ValueError("stochastic rounding needs the sequence positions of the stores")
        if x.dim() < 3:
            raise ValueError("stochastic rounding needs states shaped [..., H, K, V]")
        lead = x.shape[:-3]
        n = x.shape[-3] * x.shape[-2] * x.shape[-1]
        pos = torch.as_tensor(positions, device=x.device).expand(lead)
        rand = random_bits(sr_key(fmt.seed, sr_seed), pos, n).reshape(x.shape)
    codes = _round_codes(x, fmt, rand)
    width = TARGETS[fmt.storage][4]
    if width == 32:
        codes = torch.where(codes >= 2**31, codes - 2**32, codes)
    elif width == 16:
        codes = torch.where(codes >= 2**15, codes - 2**16, codes)
    return codes.to(_CODE_DTYPE[width]).view(fmt.pool_dtype)


def decode_format(stored: torch.Tensor) -> torch.Tensor:
    """A pool's stored values back to fp32 (exact for every format's finite values)."""
    return stored.to(torch.float32)


def store_rows(
    pool: torch.Tensor,
    idx: torch.Tensor,
    S: torch.Tensor,
    fmt: StateFormat | None,
    *,
    sr_seed: int = 0,
    positions: torch.Tensor | None = None,
) -> None:
    """pool[idx] = the fp32 states S [n, H, K, V] stored the format's way (the CPU path's store).
    Round-to-nearest fp16/bf16 use torch's conversion, which the oracle equals bit for bit."""
    fmt = parse_format(pool.dtype if fmt is None else fmt)
    if fmt.rounding == "rtne" and fmt.mantissa_bits is None and fmt.storage in ("fp32", "fp16", "bf16"):
        pool[idx] = S.to(pool.dtype)
    else:
        pool[idx] = round_to_format(S, fmt, sr_seed=sr_seed, positions=positions)
