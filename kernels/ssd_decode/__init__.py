"""The Mamba2 SSD single-token state update (decode): Triton kernel + wrapper, CPU (float32),
float64 reference."""
