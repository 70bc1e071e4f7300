"""Where an engine forward's GPU time goes: torch.profiler kernel times grouped by what they do.

A benchmark that says "3.5x the floor" needs the next sentence, "because of X": this module turns
a profiler's kernel list into a table of kernels and of categories (dense GEMM, MoE grouped GEMM,
KDA kernels, MLA attention, elementwise and copies, ...), each with its share of the GPU time, so
the slow part is read off rather than guessed. Categories come from kernel names (the CUDA
kernel's symbol): a name that matches no rule is "other", never dropped."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

# (category, pattern on the lower-cased kernel name); first match wins. Triton kernels keep their
# Python function names (kernels/kda_prefill: gate_cumsum, intra, solve_wy, state_pass, output,
# fused_intra_wy, and the stream variant's prep, diag, offdiag, inverse, wu, scan; kernels/kda_decode:
# kda_decode, _recurrent_rounded; the layers' fused rms_norm ("norm"), swiglu and moe_combine are
# elementwise); cuBLAS GEMMs have
# nvjet/gemm/xmma names; torch._grouped_mm's CUTLASS kernel is mangled, with GroupProblemShape in it
# (kernels/moe_gemm: moe_gemm, the decode alternative).
CATEGORIES: tuple[tuple[str, str], ...] = (
    ("moe grouped gemm", r"grouped|groupproblemshape|moe_gemm"),
    (
        "kda prefill",
        r"^(gate_cumsum|intra|solve_wy|state_pass|output|fused_intra_wy|prep|diag|offdiag|inverse|wu|scan)_kernel"
        r"|kda_prefill|chunk_kda",
    ),
    ("kda decode", r"kda_decode|_recurrent_rounded|fused_recurrent"),
    ("mla attention", r"flash|fmha|attention|mla_|sdpa|cudnn"),
    ("short conv", r"conv"),
    ("norm", r"norm"),
    ("gemm", r"nvjet|gemm|xmma|cutlass|sm90_|matmul|cublas"),
    ("sort/topk/scatter", r"sort|topk|radix|scatter|gather|index|cumsum|scan"),
    (
        "elementwise/copy",
        r"elementwise|vectorized|copy|fill|memcpy|memset|reduce|cat|unrolled|swiglu|moe_combine",
    ),
)


# the keys of `KernelTable.to_dict()` that are figures, not the caller's meta
_FIGURES = ("runs", "gpu_ms_per_run", "categories", "top_kernels", "kernels")


def categorize(name: str, rules: Iterable[tuple[str, str]] = CATEGORIES) -> str:
    rest = re.fullmatch(r"\(rest of (.+)\)", name)
    if rest:  # a remainder row of an old report keeps the category it was counted in
        return rest.group(1)
    low = name.lower()
    for cat, pat in rules:
        if re.search(pat, low):
            return cat
    return "other"


@dataclass
class KernelTable:
    """Kernel rows (name, calls, total ms) of `n_runs` profiled repetitions of one workload."""

    rows: list[tuple[str, int, float]]
    n_runs: int = 1
    meta: dict[str, Any] = field(default_factory=dict)

    @property
    def total_ms(self) -> float:
        return sum(r[2] for r in self.rows)

    def by_category(self) -> list[tuple[str, float, float]]:
        """(category, ms per run, share of GPU time), largest first."""
        acc: dict[str, float] = {}
        for name, _, ms in self.rows:
            cat = categorize(name)
            acc[cat] = acc.get(cat, 0.0) + ms
        tot = self.total_ms or 1.0
        return sorted(((c, ms / self.n_runs, ms / tot) for c, ms in acc.items()), key=lambda r: -r[1])

    def top(self, n: int = 25) -> list[dict[str, Any]]:
        tot = self.total_ms or 1.0
        rows = sorted(self.rows, key=lambda r: -r[2])[:n]
        return [
            {
                "kernel": name[:160],
                "category": categorize(name),
                "calls_per_run": round(calls / self.n_runs, 2),
                "ms_per_run": round(ms / self.n_runs, 4),
                "share": round(ms / tot, 4),
            }
            for name, calls, ms in rows
        ]

    def to_dict(self, n: int = 25) -> dict[str, Any]:
        return {
            **self.meta,
            "runs": self.n_runs,
            "gpu_ms_per_run": round(self.total_ms / self.n_runs, 3),
            "categories": [
                {"category": c, "ms_per_run": round(ms, 3), "share": round(s, 4)}
                for c, ms, s in self.by_category()
            ],
            "top_kernels": self.top(n),
            # every kernel, so that a later change of CATEGORIES can re-read an old profile
            "kernels": [[name, calls, round(ms, 4)] for name, calls, ms in self.rows],
        }


def from_report(table: dict[str, Any]) -> KernelTable:
    """A `KernelTable` back from `to_dict()` output, to re-read an old profile under today's
    CATEGORIES. Reports with every kernel ("kernels") come back exactly; older ones kept only the
    top kernels, so each old category's remainder (its total less its listed kernels) returns as one
    row named "(rest of CATEGORY)", which a renamed rule cannot move: exact whenever every kernel
    whose category changed is among the listed ones."""
    n = int(table.get("runs", 1))
    meta = {k: v for k, v in table.items() if k not in _FIGURES}
    if "kernels" in table:
        return KernelTable([(k, int(c), float(ms)) for k, c, ms in table["kernels"]], n_runs=n, meta=meta)
    rows = [(r["kernel"], round(r["calls_per_run"] * n), r["ms_per_run"] * n) for r in table["top_kernels"]]
    listed: dict[str, float] = {}
    for r in table["top_kernels"]:
        listed[r["category"]] = listed.get(r["category"], 0.0) + r["ms_per_run"]
    for c in table["categories"]:
        rest = c["ms_per_run"] - listed.get(c["category"], 0.0)
        if rest > 1e-6:
            rows.append((f"(rest of {c['category']})", 0, rest * n))
    return KernelTable(rows, n_runs=n, meta=meta)


def profile_kernels(
    fn: Callable[[], Any], n_runs: int = 1, sync: Callable[[], None] | None = None, cuda: bool = True
) -> KernelTable:
    """Run `fn` `n_runs` times under torch.profiler and collect its kernels' device time (CUDA), or
    its operators' self CPU time (`cuda=False`: a check of the caller on a machine without a GPU).
    The caller warms `fn` up first (compiles and autotuning must not be profiled)."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    sync = sync or (torch.cuda.synchronize if cuda else (lambda: None))
    sync()
    with profile(activities=[ProfilerActivity.CUDA if cuda else ProfilerActivity.CPU]) as prof:
        for _ in range(n_runs):
            fn()
        sync()
    want = torch.autograd.DeviceType.CUDA if cuda else torch.autograd.DeviceType.CPU
    rows: dict[str, list[float]] = {}
    for ev in prof.events():
        if ev.device_type != want:
            continue
        if cuda:
            dur_us = getattr(ev, "device_time", None)
            dur_us = ev.cuda_time if dur_us is None else dur_us  # older torch
        else:
            dur_us = ev.self_cpu_time_total
        r = rows.setdefault(ev.name, [0, 0.0])
        r[0] += 1
        r[1] += dur_us / 1000.0
    return KernelTable([(k, int(v[0]), v[1]) for k, v in rows.items()], n_runs=n_runs)


def markdown(table: dict[str, Any], title: str) -> list[str]:
    """Lines of a Markdown section for `KernelTable.to_dict()` output."""
    out = [f"### {title}", ""]
    shown = {k: v for k, v in table.items() if k not in ("categories", "top_kernels", "kernels")}
    out += [f"- {k}: {v}" for k, v in shown.items()] + [""]
    out += ["| category | GPU ms per run | share |", "|---|---:|---:|"]
    out += [
        f"| {c['category']} | {c['ms_per_run']:.2f} | {100 * c['share']:.1f}% |" for c in table["categories"]
    ]
    out += ["", "| kernel | category | calls/run | ms/run | share |", "|---|---|---:|---:|---:|"]
    for r in table["top_kernels"]:
        name = r["kernel"].replace("|", "/")[:90]
        share = f"{100 * r['share']:.1f}%"
        out.append(f"| `{name}` | {r['category']} | {r['calls_per_run']} | {r['ms_per_run']:.3f} | {share} |")
    return out + [""]
