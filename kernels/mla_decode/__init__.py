"""Absorbed MLA decode attention over a paged latent cache (Triton; one token per sequence).

scores[h, t] = scale * (q_lat[h] . c[t] + q_rot[h] . k_rot[t]),  out[h] = softmax(scores[h]) @ c
with c, k_rot the cached rows of the sequence (pool row = block_tables[b, t // bs] * bs + t % bs).

Split-KV ("flash decoding"): a sequence's context is cut into splits of SPLIT tokens; one program
per (sequence, group of heads, split) computes a partial softmax, and a second kernel combines a
sequence's partials in split order. Splits depend only on the sequence's own length, and the
combine is a sequential loop over that sequence's splits, so a row's result is the same whatever
the other rows, the grid size (`num_splits`) or the launch (CUDA graph or eager): batch invariant.
Programs whose split lies beyond the context exit at once, so a CUDA graph captured with a fixed
`num_splits` serves every context up to num_splits * SPLIT tokens."""

MLA_DECODE_SPLIT = 2048  # tokens per split of the split-KV decode kernel (no Triton import here)
