"""Triton building blocks shared by the KDA kernels: the fused gate, L2 normalisation, and the
state store that rounds to the pool's storage format (and the load that widens it back); and, for
the layer kernels (rms_norm, swiglu), torch's roundings and expf (`round_to`, `exp_as_torch`).

The format is a build constant (constexprs STORAGE, MANT_BITS, ROUNDING), so the branches below
are resolved at compile time: the fp32 build stores the fp32 registers as they are and contains no
conversion at all; fp16 round-to-nearest-even uses the hardware conversion; bf16 rtne/rtz round
with integer arithmetic (the same ties-to-even algorithm as torch's `.to(torch.bfloat16)`). Every
other format (mN, fp8, stochastic rounding, fp16 truncation) goes through one integer algorithm on
the fp32 bits, `round_codes`, the line-for-line twin of `evalkit.kernels.rounding`: Triton's CPU
interpreter converts floats by its own (truncating) code, so bit arithmetic is what keeps the GPU
and the interpreter exact and identical. Truncation ("rtz") is also what tests build as the
deliberately wrong kernel that the fp32-twin check must catch."""

from __future__ import annotations

import triton
import triton.language as tl
from triton.language.extra import libdevice

from .triton_launch import interpreting

# True when the kernels are compiled for the GPU, False in Triton's CPU interpreter (which cannot
# run inline PTX, and multiplies bf16 operands wrongly): the one switch for the code paths that differ
COMPILED = tl.constexpr(not interpreting())


@triton.jit
def kda_gate(g_raw, dt_bias, a_log, APPROX: tl.constexpr = False):
    """g = -exp(A_log) * softplus(g_raw + dt_bias), softplus as where(x > 20, x, log(1 + exp(x))).
    APPROX takes the log from the SFU's lg2.approx (as FLA's NVIDIA softplus does) instead of
    tl.log's libdevice sequence (~30 instructions per element): the production form's gate."""
    x = g_raw + dt_bias
    u = 1.0 + tl.exp(tl.minimum(x, 20.0))
    if APPROX:
        sp = tl.where(x > 20.0, x, log2_approx(u) * 0.6931471805599453)
    else:
        sp = tl.where(x > 20.0, x, tl.log(u))
    return -tl.exp(a_log) * sp


@triton.jit
def log2_approx(x):
    """log2(x) by the hardware approximation (lg2.approx.ftz.f32, max error ~2^-22); tl.log2 in
    the CPU interpreter, which cannot run PTX."""
    if COMPILED:
        return tl.inline_asm_elementwise(
            "lg2.approx.ftz.f32 $0, $1;", "=r,r", [x], dtype=tl.float32, is_pure=True, pack=1
        )
    else:
        return tl.log2(x)


@triton.jit
def row_norms(x):
    """sqrt(sum x^2 + 1e-6) of each row of a 2-D tile: the one home of the l2norm's epsilon for
    kernels that apply the norm later (as a reciprocal scale) instead of dividing the tile."""
    return tl.sqrt(tl.sum(x * x, axis=1) + 1e-6)


@triton.jit
def l2norm_rows(x):
    """x / sqrt(sum x^2 + 1e-6) over the last axis of a 2-D tile."""
    return x / row_norms(x)[:, None]


@triton.jit
def l2norm_vec(x):
    return x / tl.sqrt(tl.sum(x * x, axis=0) + 1e-6)


@triton.jit
def round_to_bf16_bits(x, ROUND_RTZ: tl.constexpr):
    """fp32 -> bf16 by bit arithmetic: ties-to-even (or truncation when ROUND_RTZ); NaN stays NaN."""
    bits = x.to(tl.uint32, bitcast=True)
    if not ROUND_RTZ:
        bits = bits + 0x7FFF + ((bits >> 16) & 1)
    hi = (bits >> 16).to(tl.uint16)
    hi = tl.where(x != x, 0x7FC0, hi).to(tl.uint16)
    return hi.to(tl.bfloat16, bitcast=True)


@triton.jit
def round_to(x, DTYPE: tl.constexpr):
    """fp32 -> DTYPE, ties to even, as torch's `.to(dtype)`: the same bits on the GPU and in the
    interpreter (whose own bf16 conversion truncates)."""
    if DTYPE == tl.bfloat16:
        return round_to_bf16_bits(x, False)
    else:
        return x.to(DTYPE)


@triton.jit
def exp_as_torch(x):
    """expf as torch's CUDA kernels compute it (libdevice, not the ex2.approx that tl.exp becomes);
    tl.exp in the interpreter, which has no libdevice."""
    if COMPILED:
        return libdevice.exp(x)
    else:
        return tl.exp(x)


# ------------------------------------------------------------------------------- state formats
# The pool's storage format is three constexprs: STORAGE ("fp32" | "fp16" | "bf16" | "fp8_e4m3" |
# "fp8_e5m2"), MANT_BITS (explicit mantissa bits kept: 23 = plain fp32, < 23 with "fp32" = mN)
# and ROUNDING ("rtne" | "rtz" | "sr"). The integer algorithm below is `evalkit.kernels.rounding`
# line for line (see its docstring for the semantics); fp8 pools are passed as uint8 views.


@triton.jit
def lowbias32(x):
    """Chris Wellons' lowbias32 integer hash on uint32 (wrapping multiplies)."""
    x = x ^ (x >> 16)
    x = x * 0x7FEB352D
    x = x ^ (x >> 15)
    x = x * 0x846CA68B
    return x ^ (x >> 16)


@triton.jit
def sr_random_bits(key, pos, elem):
    """uint32 random bits of the elements `elem` (indices within [H, K, V]) of a store at sequence
    position `pos`: lowbias32(elem ^ lowbias32(pos ^ key)); `key` is the launch's int32 key."""
    row = lowbias32(pos.to(tl.uint32) ^ key.to(tl.uint32, bitcast=True))
    return lowbias32(elem.to(tl.uint32) ^ row)


@triton.jit
def round_codes(S, rand, N: tl.constexpr, EMIN: tl.constexpr, ROUNDING: tl.constexpr):
    """fp32 S -> (magnitude code, sign bit), both uint32, for a storage with N explicit mantissa
    bits whose smallest normal has fp32-biased exponent EMIN, rounded the ROUNDING way."""
    u = S.to(tl.uint32, bitcast=True)
    sign = u >> 31
    a = u & 0x7FFFFFFF
    if EMIN > 1:  # a storage with its own subnormal range (fp16, fp8)
        e = a >> 23
        e1 = tl.maximum(e, 1)
        sub = e1 < EMIN
        m = (a & 0x7FFFFF) | tl.where(e > 0, 0x800000, 0).to(tl.uint32)
        mm = tl.where(sub, m, a)
        ss = tl.where(sub, (23 - N + EMIN) - e1, 23 - N).to(tl.uint32)
        if ROUNDING == "sr":
            mm = mm >> tl.minimum(tl.maximum(ss, 31) - 31, 31)
            ss = tl.minimum(ss, 31)
        else:
            ss = tl.minimum(ss, 25)
        base = tl.where(sub, 0, (EMIN - 1) << N).to(tl.uint32)
    else:
        mm = a
        ss = 23 - N
        base = 0
    q = mm >> ss
    if ROUNDING == "rtne":
        h = mm >> (ss - 1)
        rbit = h & 1
        rest = mm - (h << (ss - 1))
        up = rbit & ((rest != 0).to(tl.uint32) | (q & 1))
    elif ROUNDING == "rtz":
        up = 0
    else:
        low = mm - (q << ss)
        up = (low + (rand >> (32 - ss))) >> ss
    return q + up - base, sign


@triton.jit
def store_value(S, rand, STORAGE: tl.constexpr, N: tl.constexpr, ROUNDING: tl.constexpr):
    """What a store writes for the fp32 tile S: pool-typed values (uint8 codes for fp8 pools)."""
    if STORAGE == "fp32":
        if N == 23:
            return S
        else:
            code, sign = round_codes(S, rand, N, 1, ROUNDING)
            bits = (code << (23 - N)) | (sign << 31)
            bits = tl.where(S != S, S.to(tl.uint32, bitcast=True), bits)
            return bits.to(tl.float32, bitcast=True)
    elif STORAGE == "fp16" and ROUNDING == "rtne":
        return S.to(tl.float16, fp_downcast_rounding="rtne")  # the hardware conversion (IEEE)
    elif STORAGE == "bf16" and ROUNDING != "sr":
        return round_to_bf16_bits(S, ROUNDING == "rtz")
    elif STORAGE == "bf16":
        code, sign = round_codes(S, rand, 7, 1, ROUNDING)
        bits = tl.where(S != S, 0x7FC0, code | (sign << 15)).to(tl.uint16)
        return bits.to(tl.bfloat16, bitcast=True)
    elif STORAGE == "fp16":
        code, sign = round_codes(S, rand, 10, 113, ROUNDING)
        if ROUNDING == "rtz":  # IEEE truncation never overflows to inf (inf itself stays inf)
            is_inf = (S.to(tl.uint32, bitcast=True) & 0x7FFFFFFF) == 0x7F800000
            code = tl.minimum(code, tl.where(is_inf, 0x7C00, 0x7BFF).to(tl.uint32))
        else:
            code = tl.minimum(code, 0x7C00)
        bits = tl.where(S != S, 0x7E00 | (sign << 15), code | (sign << 15)).to(tl.uint16)
        return bits.to(tl.float16, bitcast=True)
    else:  # fp8: saturate to the largest finite code; 0x7F is NaN in both encodings
        if STORAGE == "fp8_e4m3":
            code, sign = round_codes(S, rand, 3, 121, ROUNDING)
            code = tl.minimum(code, 0x7E)
        else:
            code, sign = round_codes(S, rand, 2, 113, ROUNDING)
            code = tl.minimum(code, 0x7B)
        return tl.where(S != S, 0x7F | (sign << 7), code | (sign << 7)).to(tl.uint8)


@triton.jit
def round_state(S, STATE_DTYPE: tl.constexpr, ROUND_RTZ: tl.constexpr):
    """The fp32/fp16/bf16 store of before the formats (kept for evalkit.drift's per-token kernel):
    round to nearest even, or truncate when ROUND_RTZ."""
    if STATE_DTYPE == "fp32":
        return S
    elif STATE_DTYPE == "fp16":
        if ROUND_RTZ:
            return store_value(S, 0, "fp16", 10, "rtz")
        else:
            return store_value(S, 0, "fp16", 10, "rtne")
    else:
        return round_to_bf16_bits(S, ROUND_RTZ)


@triton.jit
def store_state(S, elem, pos, key, STORAGE: tl.constexpr, MANT_BITS: tl.constexpr, ROUNDING: tl.constexpr):
    """The stored form of the fp32 state tile S whose elements have indices `elem` within the
    [H, K, V] state, stored at sequence position `pos` with launch key `key` (SR only)."""
    if ROUNDING == "sr":
        rand = sr_random_bits(key, pos, elem)
    else:
        rand = 0
    return store_value(S, rand, STORAGE, MANT_BITS, ROUNDING)


@triton.jit
def _decode_fp8(c, N: tl.constexpr, EMIN: tl.constexpr, MAXC: tl.constexpr, TINY: tl.constexpr):
    """uint32 fp8 codes -> fp32: normal codes by bit arithmetic, subnormal ones as code x TINY
    (exact), codes above MAXC (NaN) as NaN. The sign is OR-ed in as a bit for both, so -0 stays
    -0 (a `where(neg, -x, x)` loaded +0 for the code 0x80 on the H200)."""
    mag = c & 0x7F
    sign = (c >> 7) << 31
    normal = ((mag + ((EMIN - 1) << N)) << (23 - N)) | sign
    tiny = (mag.to(tl.float32) * TINY).to(tl.uint32, bitcast=True) | sign
    v = tl.where(mag < (1 << N), tiny, normal).to(tl.float32, bitcast=True)
    return tl.where(mag > MAXC, float("nan"), v)


@triton.jit
def widen_state(raw, STORAGE: tl.constexpr):
    """Loaded pool values widened exactly to fp32; fp8 pools are uint8 views (one home for every
    state load: `load_state` and the decode kernel's unmasked or cache-hinted loads)."""
    if STORAGE == "fp8_e4m3":
        return _decode_fp8(raw.to(tl.uint32), 3, 121, 0x7E, 0.001953125)
    elif STORAGE == "fp8_e5m2":
        return _decode_fp8(raw.to(tl.uint32), 2, 113, 0x7B, 1.52587890625e-05)
    elif STORAGE == "bf16":  # a shift: exact for subnormals too (the interpreter's conversion is not)
        b = raw.to(tl.uint16, bitcast=True).to(tl.uint32)
        return (b << 16).to(tl.float32, bitcast=True)
    else:
        return raw.to(tl.float32)


@triton.jit
def load_state(p, mask, STORAGE: tl.constexpr):
    """Pool values at `p` widened exactly to fp32 (masked lanes: 0); fp8 pools are uint8 views."""
    if STORAGE == "fp8_e4m3" or STORAGE == "fp8_e5m2":
        raw = tl.load(p, mask=mask, other=0)
    else:
        raw = tl.load(p, mask=mask, other=0.0)
    return widen_state(raw, STORAGE)
