"""Compile every Triton kernel for an NVIDIA target without a GPU (Triton ships ptxas), to catch
GPU-only compile errors on a CPU machine, read register/spill counts, and inspect the layouts.

`python -m evalkit.kernels.compile_check` prints one line per kernel build. Used by
tests/test_kernels_compile.py (the decode builds for fp16/bf16 pools must lay out the state tile
exactly like the fp32 build, which is what makes the fp32-twin check bit-exact)."""

from __future__ import annotations

import os
import re
import subprocess
import tempfile
from dataclasses import dataclass

import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource

POOL_PTR = {"fp32": "*fp32", "fp16": "*fp16", "bf16": "*bf16", "fp8_e4m3": "*u8", "fp8_e5m2": "*u8"}


def _format_constexprs(state: str) -> dict:
    """A state format name (fp16, m3-rtz, fp8_e4m3-sr, ...) as the kernels' build constants."""
    from .formats import parse_format
    from .triton_launch import format_constexprs

    return format_constexprs(parse_format(state))


def _pool_ptr(state: str) -> str:
    from .formats import parse_format

    return POOL_PTR[parse_format(state).storage]


@dataclass
class Build:
    name: str
    ttgir: str
    ptx: str
    cubin: bytes
    shared: int

    def resources(self) -> dict:
        """Registers and spill bytes, read from the cubin with the bundled cuobjdump."""
        tool = os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin", "cuobjdump")
        with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
            f.write(self.cubin)
            f.flush()
            out = subprocess.run(
                [tool, "--dump-resource-usage", f.name], capture_output=True, text=True
            ).stdout
        reg = re.search(r"REG:(\d+)", out)
        stack = re.search(r"STACK:(\d+)", out)
        return {
            "registers": int(reg.group(1)) if reg else None,
            "stack": int(stack.group(1)) if stack else None,
        }


def compile_kernel(
    fn,
    signature: dict,
    constexprs: dict,
    *,
    num_warps: int = 4,
    num_stages: int = 3,
    arch: int = 90,
    divisible: tuple[str, ...] = (),
    maxnreg: int | None = None,
) -> Build:
    """`divisible`: integer arguments known to be multiples of 16, as Triton's launcher specializes
    them at run time (strides of 16-bit rows: their loads vectorize and pipeline only then).
    `maxnreg`: a cap on registers per thread (None: ptxas chooses)."""
    sig = dict(signature)
    for k in constexprs:
        sig[k] = "constexpr"
    ptr_args = [i for i, (k, v) in enumerate(sig.items()) if v.startswith("*") or k in divisible]
    attrs = {(i,): [["tt.divisibility", 16]] for i in ptr_args}
    src = ASTSource(fn, sig, constexprs, attrs)
    opts = {"num_warps": num_warps, "num_stages": num_stages}
    if maxnreg:
        opts["maxnreg"] = maxnreg
    c = triton.compile(src, target=GPUTarget("cuda", arch, 32), options=opts)
    return Build(fn.__name__, c.asm["ttgir"], c.asm["ptx"], c.asm["cubin"], c.metadata.shared)


def decode_build(
    state: str,
    *,
    model="bf16",
    BV=64,
    num_warps=4,
    H=32,
    K=128,
    V=128,
    VEC=4,
    even=False,
    cache="",
    v_inner=False,
    early=False,
    persist=0,
    reload=False,
) -> Build:
    """The decode kernel's build for a `state` pool; the keywords after V are `DecodeTile`'s
    options (`decode_tile_build` takes a whole tile), resolved to build constants as the wrapper does."""
    from .kda_decode.kernel import kda_decode_kernel
    from .kda_decode.wrapper import DecodeTile

    m = "*" + model
    sig = {
        "q": m, "k": m, "v": m, "g_raw": m, "beta_raw": m, "a_log": "*fp32", "dt_bias": "*fp32",
        "pool": _pool_ptr(state), "slots": "*i32", "positions": "*i64", "o": m, "scale": "fp32",
        "sr_key": "i32", "n_tiles": "i64",
    }  # fmt: skip
    tile = DecodeTile(BV, num_warps, VEC, even, cache, v_inner, early, persist, reload)
    const = {"H": H, "K": K, "V": V, **tile.constexprs(K, V), **_format_constexprs(state)}
    return compile_kernel(kda_decode_kernel, sig, const, num_warps=num_warps)


def decode_tile_build(state: str, tile, *, model="bf16", H=32, K=128, V=128) -> Build:
    """`decode_build` of a `DecodeTile` (or its tuple), the tile a launch would run."""
    from .kda_decode.wrapper import as_tile

    t = as_tile(tile)
    return decode_build(state, model=model, BV=t.BV, num_warps=t.num_warps, H=H, K=K, V=V, VEC=t.VEC,
                        even=t.even, cache=t.cache, v_inner=t.v_inner, early=t.early,
                        persist=t.persist, reload=t.reload)  # fmt: skip


def recurrent_build(state: str, tile, *, model="bf16", H=32, K=128, V=128) -> Build:
    """Drift's one-launch decode kernel (kda_decode/recurrent.py) for a `state` pool with a
    `DecodeTile`'s layout (BV, num_warps, VEC), as its wrapper launches it."""
    from .kda_decode.recurrent import _recurrent_rounded_kernel
    from .kda_decode.wrapper import as_tile

    t = as_tile(tile)
    m = "*" + model
    sig = {"q": m, "k": m, "v": m, "g_raw": m, "beta_raw": m, "a_log": "*fp32", "dt_bias": "*fp32",
           "pool": _pool_ptr(state), "slot": "i32", "o": m, "T": "i32", "scale": "fp32"}  # fmt: skip
    BK = triton.next_power_of_2(K)
    const = {"HAS_INIT": True, "H": H, "K": K, "V": V, "BK": BK, "BV": t.BV, "VEC": min(t.VEC, t.BV),
             "STATE_DTYPE": state}  # fmt: skip
    return compile_kernel(_recurrent_rounded_kernel, sig, const, num_warps=t.num_warps)


def prefill_builds(
    state: str = "fp32", *, model="bf16", H=32, K=128, V=128, prec="tf32x3", tiles=None
) -> list[Build]:
    from .kda_prefill import kernel as kp
    from .kda_prefill import stream as ks
    from .kda_prefill import wrapper as w

    t = dict(
        state_pass=w.STATE_PASS_TILE,
        output=w.OUTPUT_TILE,
        gate=w.GATE_WARPS,
        intra=w.INTRA_WARPS,
        solve=w.SOLVE_WARPS,
    )
    t.update(tiles or {})
    m, f, i32 = "*" + model, "*fp32", "*i32"
    BK, BV = triton.next_power_of_2(K), triton.next_power_of_2(V)
    sp, op = t["state_pass"], t["output"]
    return [
        compile_kernel(kp.gate_cumsum_kernel,
                       {"q": m, "k": m, "g_raw": m, "a_log": f, "dt_bias": f, "G": f, "Qg": f, "Kd": f,
                        "EGl": f, "chunk_start": i32, "chunk_end": i32, "scale": "fp32"},
                       {"H": H, "K": K, "BT": 64, "BK": BK}, num_warps=t["gate"]),
        compile_kernel(kp.intra_kernel,
                       {"q": m, "k": m, "G": f, "beta_raw": m, "Akk": f, "Aqk": f, "chunk_start": i32,
                        "chunk_end": i32, "scale": "fp32"},
                       {"H": H, "K": K, "BT": 64, "BC": 16, "BK": BK, "DOT_PREC": prec},
                       num_warps=t["intra"]),
        compile_kernel(kp.solve_wy_kernel,
                       {"k": m, "v": m, "G": f, "beta_raw": m, "Akk": f, "W": f, "U": f, "chunk_start": i32,
                        "chunk_end": i32},
                       {"H": H, "K": K, "V": V, "BT": 64, "BC": 16, "BK": BK, "BV": BV, "DOT_PREC": prec},
                       num_warps=t["solve"]),
        state_pass_build(state, H=H, K=K, V=V, prec=prec, tile=sp),
        compile_kernel(ks.output_kernel,
                       {"Qg": f, "Aqk": f, "Vn": f, "Hs": f, "o": m, "chunk_start": i32, "chunk_end": i32},
                       {"H": H, "K": K, "V": V, "BT": 64, "BK": BK, "BV": min(op[0], BV), "DOT_PREC": prec,
                        "ORDER": "chunk"},
                       num_warps=op[1], num_stages=op[2]),
    ]  # fmt: skip


def state_pass_build(state: str = "fp32", *, H=32, K=128, V=128, prec="tf32x3", tile=None) -> Build:
    """The prefill's sequential state pass (the only prefill kernel that touches the pool)."""
    from .kda_prefill import kernel as kp
    from .kda_prefill import wrapper as w

    sp = tile or w.STATE_PASS_TILE
    f, i32 = "*fp32", "*i32"
    BK, BV = triton.next_power_of_2(K), triton.next_power_of_2(V)
    return compile_kernel(kp.state_pass_kernel,
                          {"Kd": f, "EGl": f, "W": f, "U": f, "Vn": f, "Hs": f, "pool": _pool_ptr(state),
                           "slots": i32, "positions": "*i64", "sr_key": "i32", "cu_seqlens": i32,
                           "chunk_offsets": i32, "has_initial_state": i32},
                          {"H": H, "K": K, "V": V, "BT": 64, "BK": BK, "BV": min(sp[0], BV),
                           "BR": sp[3] if len(sp) > 3 else 32, "DOT_PREC": prec,
                           **_format_constexprs(state), "INTRA_BF16": False},
                          num_warps=sp[1], num_stages=sp[2])  # fmt: skip


def stream_builds(
    state: str = "fp32", *, model="bf16", H=32, K=128, V=128, prec="tf32x3", tiles=None
) -> list[Build]:
    """The stream variant's kernels (`kda_prefill/stream.py`) as the wrapper builds them; `tiles`
    overrides the wrapper's STREAM_TILES of that precision by name (prep, diag, solve, wu, scan,
    output)."""
    from .kda_prefill import stream as ks
    from .kda_prefill import wrapper as w

    t = {**w.STREAM_TILES[w.operand_kind(prec)], **(tiles or {})}
    m, f, i32 = "*" + model, "*fp32", "*i32"
    o = "*bf16" if prec == "bf16" else f
    BK, BV = triton.next_power_of_2(K), triton.next_power_of_2(V)
    (bkg, nwp, gate, prep_order), head_fast = t["prep"], t["order"][0]
    (bkc, nwo, nso, group), (nwi,), (bkw, nww, nsw) = t["offdiag"], t["inverse"], t["wu"]
    (bvs, nwc, nsc, fuse), (bvo, nw_out, ns_out) = t["scan"], t["output"]
    chunks = {"chunk_start": i32, "chunk_end": i32}
    lp = {n: w.launch_precision(prec, t, n) for n in ("offdiag", "wu", "scan", "output")}
    lp["inverse"] = w.launch_precision(w.solve_precision(prec), t, "inverse")
    (out_order,) = t["output_order"]
    presplit = w.scan_presplit(prec, t)
    builds = [
        compile_kernel(ks.prep_kernel,
                       {"g_raw": m, "a_log": f, "dt_bias": f, "G": f, "EGl": f, **chunks},
                       {"H": H, "K": K, "BT": 64, "BKG": min(bkg, BK), "APPROX_GATE": gate == "approx",
                        "ORDER": prep_order},
                       num_warps=nwp),
        compile_kernel(ks.diag_kernel,
                       {"q": m, "k": m, "G": f, "beta_raw": m, "RQ": f, "RK": f, "Aqk": o, "Akk": f, **chunks,
                        "scale": "fp32"},
                       {"H": H, "K": K, "BT": 64, "BC": 16, "BK": BK, "BH": t["diag"][0]},
                       num_warps=t["diag"][1]),
        compile_kernel(ks.offdiag_kernel,
                       {"q": m, "k": m, "G": f, "beta_raw": m, "RQ": f, "RK": f, "Akk": f, "Aqk": o,
                        **chunks},
                       {"H": H, "K": K, "BT": 64, "BC": 16, "BK": BK, "BKC": max(16, min(bkc, BK)),
                        "DOT_PREC": lp["offdiag"], "GROUP": group, "HEAD_FAST": head_fast},
                       num_warps=nwo, num_stages=nso),
        compile_kernel(ks.inverse_kernel, {"Akk": f, "Aqk": o, "Tinv": o, **chunks},
                       {"H": H, "BT": 64, "BC": 16, "SOLVE_PREC": lp["inverse"],
                        "HEAD_FAST": head_fast}, num_warps=nwi),
        compile_kernel(ks.wu_kernel,
                       {"q": m, "k": m, "v": m, "G": f, "beta_raw": m, "RQ": f, "RK": f, "Tinv": o, "W": o,
                        "U": o, "Qg": o, "Kd": o, "Kdlo": o, **chunks},
                       {"H": H, "K": K, "V": V, "BT": 64, "BK": BK, "BV": BV,
                        "BKC": max(16, min(bkw, BK, BV)), "DOT_PREC": lp["wu"], "HEAD_FAST": head_fast,
                        "PRESPLIT": presplit},
                       num_warps=nww, num_stages=nsw),
    ]  # fmt: skip
    builds.append(compile_kernel(ks.scan_kernel,
                       {"Kd": o, "EGl": f, "W": o, "Kdlo": o, "U": o, "Qg": o, "Aqk": o, "Vn": o,
                        "Hs": o, "o": m,
                        "pool": _pool_ptr(state), "slots": i32, "positions": "*i64", "sr_key": "i32",
                        "cu_seqlens": i32, "chunk_offsets": i32, "has_initial_state": i32},
                       {"H": H, "K": K, "V": V, "BT": 64, "BKH": max(16, BK // 2), "BV": min(bvs, BV),
                        "DOT_PREC": lp["scan"], **_format_constexprs(state), "INTRA_BF16": False,
                        "FUSE_OUT": bool(fuse), "PRESPLIT": presplit},
                       num_warps=nwc, num_stages=nsc))  # fmt: skip
    if not fuse:
        builds.append(compile_kernel(ks.output_kernel,
                                     {"Qg": o, "Aqk": o, "Vn": o, "Hs": o, "o": m, **chunks},
                                     {"H": H, "K": K, "V": V, "BT": 64, "BK": BK, "BV": min(bvo, BV),
                                      "DOT_PREC": lp["output"], "ORDER": out_order},
                                     num_warps=nw_out, num_stages=ns_out))  # fmt: skip
    return builds


def conv_builds(m: str, *, C: int, bias: bool, groups: int = 1) -> list[Build]:
    """The short conv's prefill and decode builds for `C` channels of model pointer type `m`,
    written as `groups` contiguous blocks of channels."""
    from .short_conv.kernel import conv_decode_kernel, conv_prefill_kernel
    from .short_conv.wrapper import BC, BT, DECODE_BC

    i32 = "*i32"
    rows = {"x": m, "weight": m, "bias": m, "conv_pool": m, "slots": i32}
    prefill = {**rows, "has_initial_state": i32, "y": m, "chunk_start": i32, "chunk_end": i32,
               "chunk_seq": i32, "cu_seqlens": i32, "stride_x": "i32", "T": "i32"}  # fmt: skip
    decode = {**rows, "y": m, "stride_x": "i32", "B": "i32"}
    const = {"C": C, "W": 4, "BW": 4, "HAS_BIAS": bias, "GROUP": C // groups}
    return [
        compile_kernel(conv_prefill_kernel, prefill, {**const, "BT": BT, "BC": BC}, divisible=("stride_x",)),
        compile_kernel(conv_decode_kernel, decode, {**const, "BC": DECODE_BC}, divisible=("stride_x",)),
    ]


def other_builds(model="bf16") -> list[Build]:
    from .gated_rmsnorm.kernel import gated_rmsnorm_kernel
    from .moe_combine import wrapper as mc
    from .moe_gemm.kernel import moe_gemm_kernel
    from .moe_gemm.wrapper import DEFAULT_TILE as mt
    from .rms_norm.kernel import rms_norm_kernel
    from .swiglu import wrapper as sw

    m = "*" + model
    return [
        *conv_builds(m, C=12288, bias=False, groups=3),  # KDA's q | k | v
        *conv_builds(m, C=10240, bias=True),  # Mamba2's conv with its bias (I + 2GN = 8192 + 2*8*128)
        compile_kernel(gated_rmsnorm_kernel,
                       {"o": m, "gate": m, "weight": "*fp32", "y": m, "n_rows": "i32", "eps": "fp32"},
                       {"V": 128, "BR": 16, "BV": 128}),
        # Kimi-Linear-48B's MoE: hidden 2304, top 8
        compile_kernel(mc.moe_combine_kernel,
                       {"ys": m, "inv": "*i64", "w": "*fp32", "out": m, "n_rows": "i32"},
                       {"D": 2304, "TOPK": 8, "BR": mc.BR, "BD": mc.BD}),
        # its experts' decode GEMMs, gate_up (N 2048, K 2304) and down (N 2304, K 1024)
        *[compile_kernel(moe_gemm_kernel, {"x": m, "w": m, "y": m, "offs": "*i32", "R": "i32"},
                         {"N": n, "K": k, "BM": mt.BM, "BN": mt.BN, "BK": mt.BK, "WIDEN": False},
                         num_warps=mt.num_warps, num_stages=mt.num_stages)
          for n, k in ((2048, 2304), (2304, 1024))],
        # the model's RMSNorm at hidden 2304 (one row per program, 8 warps) and the MoE's SwiGLU
        compile_kernel(rms_norm_kernel,
                       {"x": m, "weight": m, "y": m, "n_rows": "i32", "stride_x": "i32", "eps": "fp32"},
                       {"D": 2304, "BR": 1, "BD": 4096}, num_warps=8),
        compile_kernel(sw.swiglu_kernel, {"gu": m, "out": m, "n_rows": "i32", "stride_gu": "i32"},
                       {"INTER": 1024, "BR": sw.BR, "BI": sw.BI}),
    ]  # fmt: skip


def ssd_decode_build(state: str, *, model="bf16", H=128, G=8, P=64, N=128) -> Build:
    """The Mamba2 SSD decode step for a `state` pool at NemotronH's head dims, as its wrapper builds it."""
    from .ssd_decode import wrapper as w
    from .ssd_decode.kernel import ssd_decode_kernel

    m = "*" + model
    sig = {"x": m, "dt_raw": m, "b_in": m, "c_in": m, "a_log": m, "dt_bias": m, "d_skip": m,
           "pool": _pool_ptr(state), "slots": "*i32", "positions": "*i64", "y": m,
           "sr_key": "i32"}  # fmt: skip
    const = {"H": H, "G": G, "P": P, "N": N, **w.launch_tile(P, N), **_format_constexprs(state)}
    return compile_kernel(ssd_decode_kernel, sig, const, num_warps=w.NUM_WARPS)


def ssd_recurrent_build(state: str, *, model="bf16", H=128, G=8, P=64, N=128, BP=None) -> Build:
    """Drift's one-launch SSD decode-mode kernel (ssd_decode/recurrent.py) for a `state` pool, with
    the decode step's tile as its wrapper launches it (`BP`: another row block, for a build that
    must not match)."""
    from .ssd_decode import wrapper as w
    from .ssd_decode.recurrent import ssd_recurrent_kernel

    m = "*" + model
    sig = {"x": m, "dt_raw": m, "b_in": m, "c_in": m, "a_log": m, "dt_bias": m, "d_skip": m,
           "pool": _pool_ptr(state), "slot": "i32", "y": m, "T": "i32", "pos_last": "i32",
           "sr_key": "i32"}  # fmt: skip
    tile = w.launch_tile(P, N)
    if BP:
        tile["BP"] = BP
    const = {"HAS_INIT": True, "H": H, "G": G, "P": P, "N": N, **tile, **_format_constexprs(state)}
    return compile_kernel(ssd_recurrent_kernel, sig, const, num_warps=w.NUM_WARPS)


def ssd_prefill_build(
    state: str, *, model="bf16", H=128, G=8, P=64, N=128, chunk=64, intra="", tile=None
) -> Build:
    """The Mamba2 SSD prefill for a `state` pool at NemotronH's head dims, as its wrapper builds it;
    `tile` (a wrapper `Tile`) overrides the wrapper's."""
    from .ssd_prefill import wrapper as w
    from .ssd_prefill.kernel import ssd_prefill_kernel

    m = "*" + model
    sig = {"x": m, "dt_raw": m, "b_in": m, "c_in": m, "a_log": m, "dt_bias": m, "d_skip": m,
           "pool": _pool_ptr(state), "work": "*fp32", "slots": "*i32", "positions": "*i64",
           "cu_seqlens": "*i32", "has_initial_state": "*i32", "y": m, "sr_key": "i32"}  # fmt: skip
    t = tile or w.TILE
    const = {"H": H, "G": G, "P": P, "N": N, "CHUNK": chunk, "BT": min(t.bt, chunk), "BP": w.state_rows(t, P),
             "BN": w.state_cols(t, N), **_format_constexprs(state),
             "INTRA": intra}  # fmt: skip
    return compile_kernel(ssd_prefill_kernel, sig, const, num_warps=t.num_warps, num_stages=t.num_stages)


def ssd_split_builds(
    state: str, *, model="bf16", H=128, G=8, P=64, N=128, chunk=64, intra="", tile=None
) -> tuple[Build, Build]:
    """The split SSD prefill's two kernels (state pass, output) for a `state` pool at NemotronH's
    head dims, as the wrapper builds them for `variant="split"`; `tile` overrides the wrapper's."""
    from .ssd_prefill import wrapper as w
    from .ssd_prefill.split import ssd_output_kernel, ssd_state_pass_kernel

    m = "*" + model
    t = tile or w.TILE
    dims = {"H": H, "G": G, "P": P, "N": N, "BT": min(t.bt, chunk), "BP": w.state_rows(t, P),
            "BN": w.state_cols(t, N)}  # fmt: skip
    sig = {"x": m, "dt_raw": m, "b_in": m, "a_log": m, "dt_bias": m, "pool": _pool_ptr(state), "h": "*fp32",
           "block_offsets": "*i32", "slots": "*i32", "positions": "*i64", "cu_seqlens": "*i32",
           "has_initial_state": "*i32", "sr_key": "i32"}  # fmt: skip
    const = {**dims, "CHUNK": chunk, **_format_constexprs(state), "INTRA": intra}
    state_pass = compile_kernel(
        ssd_state_pass_kernel, sig, const, num_warps=t.num_warps, num_stages=t.num_stages
    )
    sig = {"x": m, "dt_raw": m, "b_in": m, "c_in": m, "a_log": m, "dt_bias": m, "d_skip": m, "h": "*fp32",
           "block_starts": "*i32", "block_ends": "*i32", "y": m}  # fmt: skip
    output = compile_kernel(ssd_output_kernel, sig, dims, num_warps=t.num_warps, num_stages=t.num_stages)
    return state_pass, output


def mla_prefill_build(model="bf16", *, D=192, DV=128, tile=None, prec=None) -> Build:
    """The MLA prefill attention (flash forward) for `model` inputs at Kimi-Linear's head dims."""
    import torch

    from .mla_prefill import kernel as mk
    from .mla_prefill import wrapper as w

    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}[model]
    bm, bn, nw, ns = tile or w.TILES[dtype]
    dc, nc = w.head_dim_chunks(D)
    bdv = max(16, triton.next_power_of_2(DV))
    m, i32 = "*" + model, "i32"
    sig = {"Q": m, "K": m, "V": m, "O": m, "qk_scale_log2": "fp32", "m": i32, "L": i32,
           **{f"stride_{x}{y}": i32 for x in "qkvo" for y in "ht"}}  # fmt: skip
    const = {"D": D, "DC": dc, "NC": nc, "DV": DV, "BLOCK_DV": bdv, "BLOCK_M": bm,
             "BLOCK_N": bn, "MASK_D": dc * nc != D, "MASK_DV": bdv != DV,
             "DOT_PREC": prec or w.DOT_PRECISION.get(dtype, "tf32"), "WIDEN": False}  # fmt: skip
    strides = tuple(k for k in sig if k.startswith("stride_"))  # multiples of 16 at Kimi's dims
    return compile_kernel(mk.mla_prefill_kernel, sig, const, num_warps=nw, num_stages=ns, divisible=strides)


def layout_lines(ttgir: str) -> list[str]:
    return sorted(set(re.findall(r"#\w+\d* = #ttg\.\w+<\{[^}]*\}>", ttgir)))


def summation_signature(ttgir: str) -> list[str]:
    """The ops whose result depends on summation order (reductions and dots), each with its operand
    types and the layouts spelled out. Two builds with equal signatures add in the same order;
    everything else in these kernels is elementwise, so they compute bit-identical values."""
    aliases = dict(re.findall(r"^(#\w+) = (#ttg\.\w+<\{.*?\}>)\s*$", ttgir, flags=re.M))

    def resolve(text: str) -> str:
        for _ in range(3):  # layouts nest (slice of blocked, dot_op of mma)
            text = re.sub(r"#\w+\b(?!\.)", lambda m: aliases.get(m.group(0), m.group(0)), text)
        return text

    sig = []
    for m in re.finditer(r'"tt\.reduce"\(.*?\}\) : \((.*?)\) ->', ttgir, flags=re.S):
        sig.append("reduce " + resolve(m.group(1)))
    for m in re.finditer(r"= (tt\.dot|ttng\.warp_group_dot) [^:]*: ([^\n]*?)(?: loc\(|$)", ttgir, flags=re.M):
        sig.append(m.group(1) + " " + resolve(m.group(2)))
    return sig


def inner_loops(ptx: str) -> list[str]:
    """The PTX of each innermost loop (from its "Loop Header" label to its branch back), to check
    what one step of a kernel's hot loop does (a barrier there is a shared-memory round trip)."""
    out = []
    for m in re.finditer(r"^(\$L__BB\d+_\d+):[^\n]*\n(?:\s*//[^\n]*\n)*", ptx, flags=re.M):
        if "Inner Loop Header" not in m.group(0):
            continue
        back = rf"^\s*(?:@%p\d+ )?bra(?:\.uni)?\s+{re.escape(m.group(1))};"
        end = re.search(back, ptx[m.end() :], flags=re.M)
        if end:
            out.append(ptx[m.end() : m.end() + end.start()])
    return out


def main() -> None:
    from .kda_decode.wrapper import DECODE_TILES

    builds = [decode_tile_build(s, DECODE_TILES[s]) for s in POOL_PTR]
    builds += prefill_builds() + other_builds() + [mla_prefill_build(m) for m in ("bf16", "fp32")]
    for b in builds:
        r = b.resources()
        print(f"{b.name:<24} shared={b.shared:>6}  registers={r['registers']}  stack={r['stack']}")


if __name__ == "__main__":
    main()
