"""kda_prefill op: Triton kernel, wrapper, naive torch form."""
