"""How a command that faultline prints for someone to run is spelled, so that it runs exactly
as printed in a plain shell started in the same directory.

Two things a bare ``faultline ...`` gets wrong on a fresh checkout: the venv's ``bin`` is not on
``PATH`` (``make demo`` never activates it), and settings the printing process got from its
own environment (the demo's ``demo.<run>.`` topic prefix, ``KAFKA_PORT`` turned into a
bootstrap by ``make demo``) are not in the reader's shell. ``command(settings, ...)`` spells the
executable as the shell can run it and puts every such setting in front as
``FAULTLINE_X=value`` (non-secret connection settings only: a secret is never printed).
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import sys
from pathlib import Path
from typing import Any

#: settings a printed command needs to reach the same topics and store, with their
#: environment variable; printed only when they differ from the default
CARRIED = {"kafka_bootstrap": "FAULTLINE_KAFKA_BOOTSTRAP", "topic_prefix": "FAULTLINE_TOPIC_PREFIX",
           "store_path": "FAULTLINE_STORE_PATH"}
_SAFE = re.compile(r"[A-Za-z0-9_@%+=:,./-]+")


def executable(cwd: str | Path | None = None) -> str:
    """``faultline`` when that name on ``PATH`` is this installation's script; otherwise the
    script's path, relative to ``cwd`` when it lies below it (``.venv/bin/faultline``)."""
    script = Path(sys.executable).parent / "faultline"
    found = shutil.which("faultline")
    if found and script.exists() and os.path.samefile(found, script):
        return "faultline"
    if not script.exists():  # run as `python -m faultline.cli` from an interpreter without the script
        return f"{quote(sys.executable)} -m faultline.cli"
    here = Path(cwd or os.getcwd()).absolute()
    try:
        return str(script.absolute().relative_to(here))
    except ValueError:
        return str(script.absolute())


def env_prefix(settings: Any) -> str:
    """``FAULTLINE_X=value ...`` for the carried settings that differ from the defaults."""
    from .config import Settings

    default = Settings()
    parts = [f"{var}={quote(str(getattr(settings, name)))}" for name, var in CARRIED.items()
             if getattr(settings, name) != getattr(default, name)]
    return " ".join(parts)


def command(settings: Any, *args: str, cwd: str | Path | None = None) -> str:
    """One shell line running ``faultline ARGS`` against the topics and store of ``settings``."""
    words = [env_prefix(settings), executable(cwd), *(quote(a) for a in args)]
    return " ".join(w for w in words if w)


def quote(s: str) -> str:
    """``s`` as one shell word: bare when safe, in double quotes when nothing in it expands
    there (readable SQL), else in single quotes."""
    if _SAFE.fullmatch(s):
        return s
    if not re.search(r'["$`\\]|![^=]|!$', s):
        return f'"{s}"'
    return shlex.quote(s)
