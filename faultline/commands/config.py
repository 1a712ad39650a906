"""``faultline config``: print the effective settings as JSON, secrets masked.

A secret that is set shows as ``"***"`` (null: not set), whether it came from the TOML file,
the environment or a file (``<name>_file`` in the TOML, ``FAULTLINE_<NAME>_FILE``); its value
is never printed. Every setting whose name says secret, the notify webhook URL, any value read
from a file and the credentials inside any URL are masked."""

from __future__ import annotations

import argparse

import orjson

from .. import config


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("config", help="print the effective settings (secrets masked)",
                       description=__doc__)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    try:
        s = config.load(args.config)
    except config.ConfigError as e:
        from ..cli import CliError

        raise CliError(str(e)) from None
    print(orjson.dumps(s.masked(), option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS).decode())
    return 0
