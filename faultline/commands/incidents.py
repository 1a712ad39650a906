"""``faultline incidents [--job J] [--since T] [--json]``: list stored incidents (latest
revision of each), newest first. An incident the worker withdrew (its latest revision is
``recovered``: a stall that resolved itself) is not listed; ``faultline explain ID`` still
shows it, marked withdrawn."""

from __future__ import annotations

import argparse
import sys

from ..sinks.cli_support import add_store_arg, emit, parse_time, reader
from ..sinks.trends import WITHDRAWN_STATE

SQL = """
SELECT id, revision, job, attempt, failure_ts, state, category, component,
       round(confidence, 2) AS confidence, round(lost_gpu_hours, 3) AS lost_gpu_hours, symptom, record
FROM incidents FINAL
WHERE state != {withdrawn:String}
  AND ({job:String} = '' OR job = {job:String})
  AND failure_ts >= fromUnixTimestamp64Milli({since_ms:Int64}, 'UTC')
  AND ({category:String} = '' OR category = {category:String})
ORDER BY failure_ts DESC, id
LIMIT {limit:UInt32}
"""


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("incidents", help="list stored incidents (latest revision each)", description=__doc__)
    p.add_argument("--job", default="", help="only this job id")
    p.add_argument("--since", default=None, metavar="T",
                   help="failures at or after T: epoch ms, ISO-8601 (UTC), or an age like 6h, 2d")
    p.add_argument("--category", default="", help="only this root-cause category")
    p.add_argument("--limit", type=int, default=100, help="at most N incidents (default 100)")
    p.add_argument("--json", action="store_true", help="one full incident record per line (as on fl.incidents)")
    add_store_arg(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    r = reader(args)  # refuses a store that does not exist (commands/_store.py)
    try:
        rows = r.query(SQL, {"job": args.job, "since_ms": parse_time(args.since) or 0, "withdrawn": WITHDRAWN_STATE,
                             "category": args.category, "limit": max(1, args.limit)})
    finally:
        r.close()
    if args.json:
        sys.stdout.write("".join(row["record"] + "\n" for row in rows))
        return 0
    if not rows:
        print("no incidents" + (f" for job {args.job}" if args.job else ""), file=sys.stderr)
        return 0
    cols = ["failure_ts", "job", "attempt", "state", "category", "component", "confidence", "lost_gpu_hours", "symptom", "id"]
    emit(cols, [[row[c] for c in cols] for row in rows], "table", title=f"{len(rows)} incident(s)")
    return 0
