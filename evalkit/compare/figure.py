"""Writing a compare plot: a path that cannot be written is the user's input error, and the figure
is closed either way (pyplot keeps every open figure alive)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from evalkit.errors import InputError


def save_figure(fig: Any, path: str | Path, dpi: int = 120) -> None:
    """Save `fig` as a PNG at `path` and close it."""
    import matplotlib.pyplot as plt

    try:
        fig.savefig(path, dpi=dpi)
    except OSError as exc:
        raise InputError(f"cannot write the plot to {path}: {exc.strerror or exc}") from None
    finally:
        plt.close(fig)
