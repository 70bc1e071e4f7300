"""gated_rmsnorm op: Triton kernel, wrapper, naive torch form."""
