"""What two local runs computed differently besides the state: the kernel choice (every
`KernelChoice` switch and the weights dtype that ran), the device, the prefill/decode GEMM shapes,
the evalkit sources and the numerics libraries. A state comparison must hold all of these equal;
a numerics-floor comparison (the same arm through another kernel) differs in exactly them, and
says so (`--allow-numerics-difference`)."""

from __future__ import annotations

from typing import Any

from evalkit.kernel_choice import differences as kernel_differences

ALLOW_FLAG = "--allow-numerics-difference"
# the backend record's fields that change a local run's numerics (dotted under `backend`)
BACKEND_FIELDS = (
    "device",
    "model_dtype",
    "batch_invariance.prefill_rows",
    "batch_invariance.chunks_per_forward",
    "batch_invariance.decode_width",
)
LIBRARIES = ("torch", "triton", "transformers", "tokenizers")


def _get(record: Any, dotted: str) -> Any:
    for part in dotted.split("."):
        if not isinstance(record, dict) or part not in record:
            return None
        record = record[part]
    return record


def _local(manifest: dict[str, Any]) -> bool:
    return _get(manifest, "backend.engine") == "evalkit-local"


def numerics_differences(baseline: dict[str, Any], candidate: dict[str, Any]) -> list[str]:
    """'field: A vs B' for each difference besides the state, in the order a reader checks them;
    empty for equal numerics and whenever a side is not a local run (a server's are not known).
    A field only one side records is not a difference (runs made before it was recorded)."""
    if not (_local(baseline) and _local(candidate)):
        return []
    out = [f"kernels.{d}" for d in kernel_differences(baseline.get("kernels"), candidate.get("kernels"))]
    fields = [
        *(f"backend.{f}" for f in BACKEND_FIELDS),
        "source_hash",
        *(f"libraries.{x}" for x in LIBRARIES),
    ]
    for name in fields:
        a, b = _get(baseline, name), _get(candidate, name)
        if a is not None and b is not None and a != b:
            short = (lambda v: v[:12]) if name == "source_hash" else (lambda v: v)
            out.append(f"{name}: {short(a)} vs {short(b)}")
    return out
