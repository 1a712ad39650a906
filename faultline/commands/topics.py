"""``faultline topics create|list|delete``: the contract's Kafka topics (``schemas.registry``)."""

from __future__ import annotations

import argparse
import asyncio

import orjson

from .. import config
from .. import topics as T


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("topics", help="create, list or delete the contract's Kafka topics",
                       description=__doc__)
    tsub = p.add_subparsers(dest="topics_command", metavar="ACTION", required=True)

    c = tsub.add_parser("create", help="create every topic of the contract (idempotent)")
    c.add_argument("--partitions", type=int, metavar="N",
                   help="partitions of every topic (default: input topics topic_partitions "
                        "setting, outputs 1-3)")
    c.add_argument("--replication", type=int, metavar="N",
                   help="replication factor (default: topic_replication setting)")
    c.add_argument("--retention", action="append", default=[], metavar="TOPIC=HOURS",
                   help="retention of one topic in hours (-1 keeps forever); repeatable. "
                        "Defaults: input topics topic_retention_hours (168), fl.alerts and "
                        "fl.deadletter 720, fl.incidents and fl.findings 2160")
    c.add_argument("--prefix", help="topic name prefix (default: topic_prefix setting)")
    c.add_argument("--dry-run", action="store_true", help="print the plan, touch nothing")
    c.set_defaults(func=run_create)

    ls = tsub.add_parser("list", help="show the contract's topics: present?, partitions, retention, key")
    ls.add_argument("--prefix", help="topic name prefix (default: topic_prefix setting)")
    ls.add_argument("--json", action="store_true", help="JSON lines instead of a table")
    ls.set_defaults(func=run_list)

    d = tsub.add_parser("delete", help="delete the contract's topics under the prefix")
    d.add_argument("--prefix", help="topic name prefix (default: topic_prefix setting)")
    d.add_argument("--yes", action="store_true", help="required: this deletes data")
    d.set_defaults(func=run_delete)


def _settings(args: argparse.Namespace) -> config.Settings:
    from ..cli import CliError

    try:
        return config.load(args.config, topic_prefix=args.prefix)
    except config.ConfigError as e:
        raise CliError(str(e)) from None


def _run(coro):
    from ..cli import CliError

    try:
        return asyncio.run(coro)
    except T.TopicsError as e:
        raise CliError(str(e)) from None


def run_create(args: argparse.Namespace) -> int:
    from ..cli import CliError

    s = _settings(args)
    if args.partitions is not None and args.partitions < 1:
        raise CliError("--partitions must be >= 1")
    if args.replication is not None and args.replication < 1:
        raise CliError("--replication must be >= 1")
    try:
        retention = T.parse_retention(args.retention)
    except T.TopicsError as e:
        raise CliError(str(e)) from None
    specs = T.plan(s, partitions=args.partitions, replication=args.replication,
                   retention_hours=retention)
    if args.dry_run:
        for sp in specs:
            print(f"{sp.name:28} partitions={sp.partitions} replication={sp.replication} "
                  f"retention_h={sp.retention_hours:g} key={sp.key}")
        return 0
    result = _run(T.create_topics(s, specs))
    for sp in specs:
        print(f"{sp.name:28} {result[sp.name]:24} retention_h={sp.retention_hours:g} key={sp.key}")
    return 0


def run_list(args: argparse.Namespace) -> int:
    s = _settings(args)
    rows = _run(T.list_topics(s))
    for r in rows:
        if args.json:
            print(orjson.dumps(r).decode())
        else:
            ret = "-" if r["retention_hours"] is None else f"{r['retention_hours']:g}"
            print(f"{r['topic']:28} {'present' if r['exists'] else 'MISSING':8} "
                  f"partitions={r['partitions'] or '-':<3} retention_h={ret:6} key={r['key']}")
    return 0 if all(r["exists"] for r in rows) else 1


def run_delete(args: argparse.Namespace) -> int:
    from ..cli import CliError

    s = _settings(args)
    if not args.yes:
        raise CliError("refusing to delete without --yes (this deletes the data of "
                       f"{len(T.ALL_TOPICS)} topics under prefix {s.topic_prefix!r})")
    names = _run(T.delete_topics(s))
    print(f"deleted {len(names)} topics: {' '.join(names) or '-'}")
    return 0
