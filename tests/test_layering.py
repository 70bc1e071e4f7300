"""The import graph, built statically (ast) over the source tree, obeys the layering:
kernels at the bottom (they import nothing of evalkit), then model, engine, backends, and the
commands on top; compare -> store -> stats; tasks beside the engine, using neither it nor the
backends; no cycles among the top-level subpackages, nor among modules (files); and the model
and engine reach a kernel only through the dispatcher (`evalkit.kernels`, its `dispatch` and its
shared modules), never an op folder's modules. Imports inside functions count too: a lazy import
is still a dependency."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# source folder -> the package name it is installed as (kernels/ and tasks/ live beside evalkit/)
PACKAGES = {"evalkit": "evalkit", "kernels": "evalkit.kernels", "tasks": "evalkit.tasks"}

# subpackage -> subpackages it must not import
FORBIDDEN: dict[str, set[str]] = {
    "model": {"engine", "backends", "runner", "serve", "commands"},
    "engine": {"backends", "runner", "serve", "commands"},
    "backends": {"runner", "serve", "commands"},
    "stats": {"compare", "store"},
    "store": {"compare"},
    "tasks": {"backends", "engine"},
}


def _modules(root: Path) -> dict[str, Path]:
    """Dotted module name -> file, for every .py file of the three source folders."""
    found = {}
    for folder, name in PACKAGES.items():
        for f in sorted((root / folder).rglob("*.py")):
            parts = [p for p in f.relative_to(root / folder).with_suffix("").parts if p != "__init__"]
            if folder == "evalkit" and parts and parts[0] in ("kernels", "tasks"):
                continue  # links to the folders beside evalkit/, read there
            found[".".join([name, *parts])] = f
    return found


def _imported(module: str, path: Path, known: set[str]) -> set[str]:
    """The evalkit modules `module` imports, anywhere in the file (top level or in a function)."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    out = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            # `from pkg import mod` depends on pkg.mod; `from pkg import name` on pkg itself
            modules = {f"{target}.{a.name}" for a in node.names} & known
            out.update(modules)
            if len(modules) < len(node.names):
                out.add(target)
    return {m for m in out if m == "evalkit" or m.startswith("evalkit.")}


def import_graph(root: Path = ROOT) -> dict[str, set[str]]:
    mods = _modules(root)
    return {m: _imported(m, f, set(mods)) for m, f in mods.items()}


def subpackage(module: str) -> str:
    """evalkit.engine.scheduler -> 'engine'; evalkit.cli -> 'cli'; evalkit -> ''."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def violations(graph: dict[str, set[str]]) -> list[str]:
    found = []
    for mod, targets in sorted(graph.items()):
        layer = subpackage(mod)
        for t in sorted(targets):
            if layer == "kernels" and subpackage(t) != "kernels":
                found.append(f"{mod} imports {t}: kernels import nothing of evalkit but evalkit.kernels")
            elif subpackage(t) in FORBIDDEN.get(layer, ()):
                found.append(f"{mod} imports {t}: {layer} must not import {subpackage(t)}")
    return found


def strongly_connected(edges: dict[str, set[str]]) -> list[list[str]]:
    """Groups of more than one node that reach each other (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(edges.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                groups.append(sorted(group))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return groups


def subpackage_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Cycles of the subpackage graph."""
    edges: dict[str, set[str]] = {}
    for mod, targets in graph.items():
        a = subpackage(mod)
        edges.setdefault(a, set()).update(b for t in targets if (b := subpackage(t)) not in ("", a))
    return strongly_connected(edges)


def module_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Cycles of the file graph: modules that import each other, directly or through others."""
    return strongly_connected(
        {m: {t for t in targets if t in graph and t != m} for m, targets in graph.items()}
    )


# kernels' modules every layer may use: the package (its public functions), the dispatcher, and the
# shared vocabulary beside it; an op folder's modules (wrapper, kernel, ...) sit behind the dispatcher
KERNEL_ENTRY_LAYERS = {"model", "engine"}


def kernel_bypasses(graph: dict[str, set[str]], root: Path = ROOT) -> list[str]:
    """Imports by the model or engine of a module inside a kernel op folder."""
    op_folders = {d.name for d in (root / "kernels").iterdir() if (d / "__init__.py").is_file()}
    found = []
    for mod, targets in sorted(graph.items()):
        if subpackage(mod) not in KERNEL_ENTRY_LAYERS:
            continue
        for t in sorted(targets):
            parts = t.split(".")
            if parts[:2] == ["evalkit", "kernels"] and len(parts) > 2 and parts[2] in op_folders:
                found.append(f"{mod} imports {t}: call kernels through evalkit.kernels or its dispatch")
    return found


def test_the_graph_covers_the_tree():
    graph = import_graph()
    assert {"evalkit.kernels.kda_decode.wrapper", "evalkit.tasks.base", "evalkit.engine"} <= set(graph)
    assert "evalkit.kernels.formats" in graph["evalkit.kernels.common"]  # relative import resolved


def test_layering():
    assert violations(import_graph()) == []


def test_no_cycles_among_subpackages():
    assert subpackage_cycles(import_graph()) == []


def test_no_cycles_among_modules():
    assert module_cycles(import_graph()) == []


def test_the_model_and_engine_reach_kernels_through_the_dispatcher():
    assert kernel_bypasses(import_graph()) == []


def test_a_planted_violation_is_found(tmp_path):
    """The checks themselves can fail: a small tree with a kernel importing evalkit.errors, a
    function-level import of the engine from a task, a cycle between store and compare, a cycle
    of three drift modules (one leg a lazy relative import), and a model layer importing a kernel
    op folder's wrapper."""
    files = {
        "evalkit/__init__.py": "",
        "evalkit/errors.py": "",
        "evalkit/engine/__init__.py": "",
        "evalkit/store/__init__.py": "from evalkit.compare import x\n",
        "evalkit/compare/__init__.py": "from ..store import y\n",
        "kernels/__init__.py": "",
        "kernels/common.py": "from evalkit.errors import EvalkitError\n",
        "tasks/__init__.py": "",
        "tasks/base.py": "def f():\n    from evalkit.engine import LLMEngine\n",
        "evalkit/drift/__init__.py": "",
        "evalkit/drift/a.py": "from evalkit.drift import b\n",
        "evalkit/drift/b.py": "def f():\n    from .c import x\n",
        "evalkit/drift/c.py": "from evalkit.drift.a import y\n",
        "evalkit/model/__init__.py": "",
        "evalkit/model/mla.py": "from evalkit.kernels.mla_decode import wrapper\n",
        "kernels/dispatch.py": "from . import common\n",
        "kernels/mla_decode/__init__.py": "",
        "kernels/mla_decode/wrapper.py": "",
    }
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    graph = import_graph(tmp_path)
    found = "\n".join(violations(graph))
    assert "evalkit.kernels.common imports evalkit.errors" in found
    assert "evalkit.tasks.base imports evalkit.engine" in found
    assert "evalkit.store imports evalkit.compare" in found
    assert subpackage_cycles(graph) == [["compare", "store"]]
    drift = ["evalkit.drift.a", "evalkit.drift.b", "evalkit.drift.c"]
    assert module_cycles(graph) == [["evalkit.compare", "evalkit.store"], drift]
    assert "evalkit.kernels" not in graph["evalkit.kernels.dispatch"]  # `from . import common`: common only
    assert kernel_bypasses(graph, tmp_path) == [
        "evalkit.model.mla imports evalkit.kernels.mla_decode.wrapper: call kernels through evalkit.kernels"
        " or its dispatch"
    ]


def test_the_checkout_kernels_folder_never_shadows_the_kernels_distribution():
    """`python -m ...` run in the checkout puts its root first on sys.path, where `kernels/` would
    be found as the top-level `kernels` that transformers (>= 5.25) imports from Hugging Face's
    distribution (the CI broke on it). Importing evalkit moves the root behind site-packages."""
    import subprocess
    import sys

    def kernels_origin(code: str, cwd: Path) -> str:
        code += "; import importlib.util; s = importlib.util.find_spec('kernels'); print(s and s.origin)"
        done = subprocess.run(
            [sys.executable, "-c", code], cwd=cwd, capture_output=True, text=True, timeout=60
        )
        assert done.returncode == 0, done.stderr
        return done.stdout.strip()

    folder = str(ROOT / "kernels" / "__init__.py")
    assert kernels_origin("pass", ROOT) == folder  # what the fix is for
    installed = kernels_origin("pass", ROOT / "tests")  # the root not on sys.path: site-packages' view
    after = kernels_origin("import evalkit", ROOT)
    # the distribution when one is installed (transformers >= 5.25 brings it), else the folder, last
    assert after == (folder if installed == "None" else installed)
    assert kernels_origin("import evalkit, tests.helpers", ROOT)  # the root still serves what only it holds
    last = subprocess.run(
        [sys.executable, "-c", "import os, sys, evalkit; print(os.path.abspath(sys.path[-1] or os.curdir))"],
        cwd=ROOT, capture_output=True, text=True, timeout=60,
    ).stdout.strip()  # fmt: skip
    assert last == str(ROOT)
