"""short_conv op: Triton kernel, wrapper, naive torch form."""
