"""How many torch threads the CPU engine uses.

The CPU engine's ops are small (a few-million-parameter model; decode is one token per step),
so intra-op threads mostly add synchronisation, and on a shared machine every extra thread waits
for a busy core: the README's main job on a loaded 2-core box ran 15x faster with one thread
than with torch's default of one thread per core. The engine therefore uses one thread unless
the user says otherwise: `EVALKIT_CPU_THREADS`, else `OMP_NUM_THREADS` (torch's own variable).
`scripts/bench_cpu_prefill.py` measures 1 against 2 threads."""

from __future__ import annotations

import os

from evalkit.errors import InputError

ENV = "EVALKIT_CPU_THREADS"


def choose_cpu_threads(environ: dict[str, str] | None = None) -> int:
    """`EVALKIT_CPU_THREADS`, else `OMP_NUM_THREADS`, else 1; a bad value is a user error."""
    env = os.environ if environ is None else environ
    for name in (ENV, "OMP_NUM_THREADS"):
        value = env.get(name, "").strip()
        if value:
            if not value.isdigit() or int(value) < 1:
                raise InputError(f"{name} must be a positive whole number of threads, got {value!r}")
            return int(value)
    return 1


def apply_cpu_threads() -> int:
    """Set torch's intra-op threads for the CPU engine; returns the number set."""
    import torch

    n = choose_cpu_threads()
    if torch.get_num_threads() != n:
        torch.set_num_threads(n)
    return n
