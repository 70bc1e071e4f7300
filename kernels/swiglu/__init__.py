"""swiglu op (silu(g) * u, the activation of a SwiGLU MLP): Triton kernel (kernel.py) and wrapper
(wrapper.py), CPU implementation (cpu.py: the plain torch form), float64 reference (reference.py)."""
