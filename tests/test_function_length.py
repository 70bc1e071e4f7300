"""No function of the package (evalkit/, kernels/, tasks/) is longer than 100 lines (its `def`
line to its last line, decorators aside): a longer one does several things, and is split by idea.

ALLOWED names the ones still over, each with whose it is: when that work lands they are split and
the entry goes (a stale entry, one now short enough or gone, fails too)."""

from __future__ import annotations

import ast
from pathlib import Path

from test_layering import PACKAGES, ROOT

LIMIT = 100

# "path:function" -> why it is still over the limit (empty: none is)
ALLOWED: dict[str, str] = {}


def long_functions(root: Path = ROOT, limit: int = LIMIT) -> dict[str, int]:
    """ "path:function" -> its length in lines, for every function (methods and nested ones too)
    longer than `limit` in the package's source folders."""
    found = {}
    for folder in PACKAGES:
        for f in sorted((root / folder).rglob("*.py")):
            tree = ast.parse(f.read_text(encoding="utf-8"), filename=str(f))
            for node in ast.walk(tree):
                if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                    length = node.end_lineno - node.lineno + 1
                    if length > limit:
                        found[f"{f.relative_to(root).as_posix()}:{node.name}"] = length
    return found


def test_no_function_is_longer_than_the_limit():
    too_long = {name: n for name, n in long_functions().items() if name not in ALLOWED}
    assert not too_long, f"functions over {LIMIT} lines (split them by idea): {too_long}"


def test_every_allowed_function_is_still_over_the_limit():
    stale = sorted(set(ALLOWED) - set(long_functions()))
    assert not stale, f"no longer over {LIMIT} lines (remove from ALLOWED): {stale}"


def test_a_planted_long_function_is_found(tmp_path):
    """The check can fail: 101 lines in a kernel, a method of 101 lines in a task, and a nested
    function of 101 lines are found; a function of exactly 100 lines is not."""

    def body(name: str, lines: int, indent: str = "") -> str:
        return f"{indent}def {name}():\n" + "".join(f"{indent}    x = {i}\n" for i in range(lines - 1))

    files = {
        "evalkit/a.py": body("fine", 100),
        "kernels/op/kernel.py": "import triton\n\n\n@triton.jit\n" + body("k", 101),
        "tasks/t.py": "class T:\n" + body("requests", 101, "    "),
        "evalkit/b.py": "def outer():\n" + body("inner", 101, "    ") + "    return inner\n",
    }
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    assert long_functions(tmp_path) == {
        "evalkit/b.py:outer": 103,
        "evalkit/b.py:inner": 101,
        "kernels/op/kernel.py:k": 101,
        "tasks/t.py:requests": 101,
    }
