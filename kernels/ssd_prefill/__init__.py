"""The Mamba2 SSD packed variable-length prefill: Triton kernel (chunked) + wrapper, CPU (float32,
chunked), float64 reference (token by token)."""
