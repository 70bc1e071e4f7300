"""`evalkit run`: every task's requests, asked of one backend, written to a run directory.

`plan` decides what is left to ask (resume), `execute` asks and stores, `progress` and
`table` show it, `setup` turns command-line choices into a backend and a manifest.
"""

from evalkit.runner.execute import RunOutcome, RunSpec, run_evaluation

__all__ = ["RunOutcome", "RunSpec", "run_evaluation"]
