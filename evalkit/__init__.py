"""evalkit: does storing a linear-attention model's recurrent state in fp16/bf16 cost accuracy?"""

__version__ = "0.1.0"
