"""`evalkit drift`: how the error of a 16-bit recurrent state, and the output divergence it causes,
grow with sequence length.

Every arm (fp16, bf16, ...) runs in lockstep with an fp32 arm over the same tokens, chunk by
chunk, and metrics are computed and discarded on the fly: nothing of size [L, vocab] is ever kept.

Modules, one idea each:
- `positions`: log-spaced position buckets and state checkpoints.
- `accumulate`: per-bucket running statistics (mean, sd, max, approximate quantiles).
- `token_metrics`: KL(p_fp32 || p_arm), top-1 agreement and NLL deltas from two logit blocks.
- `state_metrics`: relative Frobenius error and max |value| of each KDA layer's stored state.
- `free_running`: first divergent token, agreement after it, health flags.
- `growth`: slope of log(error) against log(position) with a CI, and a plain-words verdict.
- `teacher_forced`, `generate`: the lockstep drivers over an `ArmSession` (see `session`).
- `rundir`, `plots`, `report`: the run directory, PNG plots and the Markdown summary.
"""
