"""Package discovery for the layout of pyproject.toml's ``package-dir`` (each layer in a
top-level folder installed as ``faultline.<layer>``): every folder under those roots is a
package, and every file in it that is not Python is package data. So a new subpackage, or a
folder of SQL, templates or CSV, is installed without editing a list (a folder left out of
such a list imported in the editable checkout and was missing from a plain install)."""

import tomllib
from pathlib import Path

from setuptools import setup

#: package name -> folder, from pyproject.toml's [tool.setuptools] package-dir
ROOTS = tomllib.loads(Path("pyproject.toml").read_text("utf-8"))["tool"]["setuptools"]["package-dir"]
SKIP = {"__pycache__"}


def discover() -> tuple[list[str], dict[str, list[str]]]:
    packages, data = [], {}
    for name, root in ROOTS.items():
        for d in sorted([Path(root), *Path(root).rglob("*")]):
            if not d.is_dir() or SKIP & set(d.parts) or any(p.startswith(".") for p in d.parts):
                continue
            pkg = ".".join([name, *d.relative_to(root).parts])
            packages.append(pkg)
            files = sorted({"*" + f.suffix for f in d.iterdir() if f.is_file() and f.suffix not in (".py", ".pyc")})
            if files:
                data[pkg] = files
    return packages, data


packages, package_data = discover()
setup(packages=packages, package_data=package_data)
