"""moe_gemm op: Triton kernel (kernel.py) and wrapper (wrapper.py), CPU implementation (cpu.py),
float64 reference (reference.py)."""
