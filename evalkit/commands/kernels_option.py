"""`--kernels`: the numerics switches besides the arm (`evalkit.kernel_choice`), shared by the
commands that run the local engine. The one place the EVALKIT_* switch variables are read: they
fill this option's default, so a run's choice is decided once, here, and recorded in its manifest."""

from __future__ import annotations

import argparse
import os

from evalkit.kernel_choice import ENV_KEYS, KernelChoice, kernels_from_environment, parse_kernels

HELP = (
    "numerics switches besides the state, KEY=VALUE[,...] (defaults first): kda_prefill=stream|split, "
    "ssd_prefill=walk|split (the Mamba2 SSD prefill; GPU), "
    "prefill_dots=fp32|bf16 (bf16: the servers' prefill numerics, FLA's bf16 products; GPU), "
    "moe_combine=fused|torch, moe_decode=triton|grouped_mm (the MoE experts' decode GEMMs; GPU), "
    "fused_elementwise=on|off, mla_prefill=auto|triton|flash|sdpa, "
    "weights=auto|fp32|bf16|fp16 (auto: bf16 on GPU, fp32 on CPU), tf32=off|on; "
    f"{', '.join(ENV_KEYS)} fill the default (evalkit/kernel_choice.py)"
)


def add_kernels_argument(parser: argparse.ArgumentParser | argparse._ArgumentGroup) -> None:
    parser.add_argument("--kernels", default=None, metavar="KEY=VALUE,...", help=HELP)


def kernels_from_args(args: argparse.Namespace) -> KernelChoice:
    """`--kernels` over the defaults the environment variables set (one-line InputError)."""
    return parse_kernels(getattr(args, "kernels", None), base=kernels_from_environment(dict(os.environ)))
