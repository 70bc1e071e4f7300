"""kda_decode op: Triton kernel, wrapper, naive torch form."""
