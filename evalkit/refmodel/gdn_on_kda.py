"""Train the Gated DeltaNet twin through FLA's KDA chunk kernel.

FLA 0.6.0 refuses GDN's chunked backward under Triton 3.4-3.7.0 on Hopper GPUs (wrong results
in `chunk_bwd_dqkwg`, its issue #640), and the lent H200 has Triton 3.6. GDN is KDA with one
decay per head: S_t = a_t (I - b k k^T) S_{t-1} + b k v^T, and KDA's Diag(a_t) over the key
channels equals a_t I when every channel has the same decay. So the per-head log-decay repeated
over the key channels, fed to `chunk_kda` (whose backward trained the KDA model on that GPU),
computes the same recurrence and gradients. Tests check the identity against transformers' own
GDN reference on the CPU."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

NOTE = (
    "GDN chunk via FLA chunk_kda with the per-head gate repeated over the key channels "
    "(FLA's GDN backward refuses Triton < 3.7.1 on Hopper)"
)


def gdn_chunk_via(chunk_kda: Callable[..., Any]) -> Callable[..., Any]:
    """A drop-in for transformers' `torch_chunk_gated_delta_rule` that runs `chunk_kda`."""

    def chunk_gdn_as_kda(
        query: Any,
        key: Any,
        value: Any,
        g: Any,
        beta: Any,
        chunk_size: int = 64,
        initial_state: Any = None,
        output_final_state: bool = False,
        use_qk_l2norm_in_kernel: bool = False,
        cu_seqlens: Any = None,
        **_: Any,
    ) -> tuple[Any, Any]:
        if query.shape[2] != value.shape[2]:
            raise ValueError("grouped value heads are not supported by the KDA route")
        g_channels = g.float()[..., None].expand(*g.shape, key.shape[-1]).contiguous()
        kw = {"cu_seqlens": cu_seqlens} if cu_seqlens is not None else {}
        return chunk_kda(
            query,
            key,
            value,
            g_channels,
            beta,
            initial_state=initial_state,
            output_final_state=output_final_state,
            use_qk_l2norm_in_kernel=use_qk_l2norm_in_kernel,
            **kw,
        )

    return chunk_gdn_as_kda


def route_gdn_through_kda(chunk_kda: Callable[..., Any] | None = None) -> str | None:
    """Point transformers' Qwen3.5 GDN layers at `chunk_kda` (default: FLA's, on a GPU only).
    Returns the note for the recipe, or None when nothing was changed (CPU, no FLA)."""
    import transformers.models.qwen3_5.modeling_qwen3_5 as qwen3_5

    if chunk_kda is None:
        import torch

        if not torch.cuda.is_available():
            return None
        try:
            from fla.ops.kda import chunk_kda
        except ImportError:
            return None
    qwen3_5.torch_chunk_gated_delta_rule = gdn_chunk_via(chunk_kda)
    return NOTE


def gdn_route() -> str | None:
    """The note when transformers' GDN chunk currently runs through a KDA kernel, else None."""
    import sys

    qwen3_5 = sys.modules.get("transformers.models.qwen3_5.modeling_qwen3_5")
    fn = getattr(qwen3_5, "torch_chunk_gated_delta_rule", None)
    return NOTE if getattr(fn, "__name__", "") == "chunk_gdn_as_kda" else None
