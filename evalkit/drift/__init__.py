"""`evalkit drift`: how the error of a 16-bit recurrent state, and the output divergence it causes,
grow with sequence length, across independent prompts, against an A/A noise floor.

Every arm (fp16, bf16, ...) runs in lockstep with an fp32 arm over the same tokens, chunk by
chunk, and metrics are computed and discarded on the fly: nothing of size [L, vocab] is ever kept.

Modules, one idea each:
- `positions`: log-spaced position buckets and state checkpoints.
- `accumulate`: per-bucket statistics (mean, sd, max, exact quantiles).
- `token_metrics`: KL(p_fp32 || p_arm), top-1 agreement and NLL deltas from two logit blocks.
- `state_metrics`: relative Frobenius error and max |value| of each KDA layer's stored state.
- `free_running`: first divergent token, agreement after it, health flags.
- `growth`: one trajectory's slope of log(error) on log(position) (WLS; Poisson for flips).
- `teacher_forced`, `generate`: the lockstep drivers over an `ArmSession`, the backend seam's
  state probe (`evalkit.backends.probe`; the local engine's: `evalkit.backends.local_probe`).
- `prompts`, `floor`: the N independent prompts; the A/A arm (fp32 computed another way).
- `across`: statistics across prompts (t-CIs, per-prompt slopes summarised, floor ratios).
- `study`: N prompts × modes × arms, written after every prompt; `study_summary`: one mode across
  prompts; `verdict`: pasteable sentences.
- `driver`: manifest, errors, progress, free running; `campaign`: the GPU studies' parts and costs.
- `link`, `link_stats`: per-question divergence of two `evalkit run` arms against flips.
- `result`: the typed summary (`DriftSummary` and its parts, `to_dict()` for summary.json);
  `rows`: the per-prompt rows as the run store's lines (its writer's lock and resume); `refit`.
- `rundir`, `plots`, `report`, `study_report`: the run directory, PNGs and the Markdown summary.
"""
