"""Kimi-Linear layers for the engine: RMSNorm, KDA, MLA (no rotary), MoE and the dense MLP."""
