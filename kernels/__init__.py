"""KDA kernels (installed as `evalkit.kernels`): one op per folder, each with its Triton kernel,
Python wrapper and naive reference; the state pool's dtype is a build constant."""
