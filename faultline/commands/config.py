"""``faultline config``: print the effective settings, secrets masked."""

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
