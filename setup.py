"""Package discovery: `kernels/` and `tasks/` live at the repository's top level but install as
`evalkit.kernels` and `evalkit.tasks`, so that `evalkit` is the only top-level module (a top-level
`kernels` would shadow Hugging Face's `kernels` package)."""

from pathlib import Path

from setuptools import setup

ROOT = Path(__file__).parent
MAPPED = {"evalkit": "evalkit", "evalkit.kernels": "kernels", "evalkit.tasks": "tasks"}


def _packages() -> tuple[list[str], dict[str, str]]:
    packages, package_dir = [], {}
    for name, folder in MAPPED.items():
        base = ROOT / folder
        for init in sorted(base.rglob("__init__.py")):
            rel = init.parent.relative_to(base)
            pkg = ".".join([name, *rel.parts]) if rel.parts else name
            if pkg.startswith("evalkit.kernels") and name == "evalkit":
                continue
            packages.append(pkg)
            package_dir[pkg] = str(Path(folder, *rel.parts))
    return packages, package_dir


packages, package_dir = _packages()
setup(
    packages=packages,
    package_dir=package_dir,
    package_data={
        "evalkit": ["assets/**/*"],
        "evalkit.tasks": ["**/*.yaml", "**/*.json", "**/*.txt"],
        "evalkit.compare": ["schema.json"],
    },
    include_package_data=True,
)
