"""`evalkit cache-probe`: does a server's answer depend on its prefix cache?

A linear-attention server that caches prefix states may store them in another dtype than the arm
says (as once happened in SGLang): the same prompt then answers differently when its prefix is
cached. Per question the probe asks cold (cache flushed), cold again (the floor: what two cold
answers differ by) and warm (the prompt's prefix cached), greedy, with log-probabilities (without
a flush: cold behind a unique prefix, the floor two warm answers), and tests whether warm departs
from cold more often than the floor does: `server` (the calls),
`probe` (the sequence per question), `verdict` (the paired tests), `report` (JSON and Markdown).
"""
