"""The Mamba2 SSD packed variable-length prefill: Triton kernel (chunked) + wrapper, CPU (float32,
chunked), float64 reference (token by token)."""

SSD_PREFILL_BLOCK = 32  # tokens per block of the default tile (no Triton import here): the split
# variant keeps one fp32 state per block and head in scratch (`evalkit.engine.memory` counts it)
