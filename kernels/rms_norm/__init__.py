"""rms_norm op: Triton kernel (kernel.py) and wrapper (wrapper.py), CPU implementation (cpu.py: the
plain torch form, transformers' own), float64 reference (reference.py)."""
