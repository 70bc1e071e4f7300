"""evalkit: does storing a linear-attention model's recurrent state in fp16/bf16 cost accuracy?"""

import os
import sys

__version__ = "0.1.0"


def _unshadow_checkout_root() -> None:
    """Move this checkout's root to the end of sys.path, where `python -m ...` run inside it puts
    it first: its `kernels/` folder (installed as `evalkit.kernels`) would shadow the `kernels`
    distribution that transformers (>= 5.25) imports at import time. Last, the root still serves
    what only it holds (the test suite's `tests.helpers`). Only a source checkout is touched (it has
    a setup.py beside `kernels/`), never an installed site-packages."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    if not (os.path.isfile(os.path.join(root, "setup.py")) and os.path.isdir(os.path.join(root, "kernels"))):
        return
    at_root = [p for p in sys.path if os.path.abspath(p or os.curdir) == root]
    if at_root:
        sys.path[:] = [p for p in sys.path if p not in at_root] + at_root


_unshadow_checkout_root()
