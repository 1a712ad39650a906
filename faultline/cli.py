"""The ``faultline`` command. Each subcommand lives in ``faultline/commands/<name>.py``
and exposes ``register(subparsers)``; modules are discovered, so adding a command
touches no shared file."""

from __future__ import annotations

import argparse
import importlib
import pkgutil
import sys

from . import __version__
from . import commands as _commands


class CliError(Exception):
    """A user-facing failure: the message says what failed and what to do. Exit 2."""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="faultline",
        description="Why did the training job stop? Collect every layer, join it per job "
        "in Kafka streams, and explain each interruption.",
    )
    parser.add_argument("--version", action="version", version=f"faultline {__version__}")
    parser.add_argument("--config", metavar="FILE", help="TOML settings file (default: $FAULTLINE_CONFIG or ./faultline.toml)")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for mod in sorted(pkgutil.iter_modules(_commands.__path__), key=lambda m: m.name):
        if not mod.name.startswith("_"):
            importlib.import_module(f"{_commands.__name__}.{mod.name}").register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        rc = args.func(args)
    except CliError as e:
        print(f"faultline {args.command}: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return 0
    return int(rc or 0)


if __name__ == "__main__":
    # `python -m faultline.cli`: run the imported module so commands' `from ..cli import
    # CliError` is the same class this main() catches
    from faultline.cli import main as _main

    sys.exit(_main())
