"""mla_prefill op: causal softmax attention of a prefill chunk over its sequence's whole context
(Triton flash-attention forward, kernel.py; launch and checks, wrapper.py; float64 reference,
reference.py).

Why a kernel of our own: Kimi-Linear's query/key head dim (192) differs from its value head dim
(128). PyTorch SDPA's flash kernel needs them equal (evalkit pads v to 192, wasting 1/6 of the PV
work) and, for fp32 inputs (the drift studies' fp32 models), SDPA has no flash kernel at all and
falls to its slow memory-efficient SIMT path. This kernel takes dqk != dv as they are, and runs fp32
inputs on tensor cores with tf32x3 dots (about fp32 accuracy). One launch per call, no atomics or
split-K: a sequence's result does not depend on anything else in the batch."""
