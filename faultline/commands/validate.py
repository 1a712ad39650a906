"""``faultline validate FILE|-``: check JSON lines against the contract, one verdict per line."""

from __future__ import annotations

import argparse
import sys

import orjson

from ..schemas import ContractError, decode, now_ms


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("validate", help="validate JSON lines against the event contract",
                       description=__doc__ + " Prints {\"line\": N, \"ok\": bool, \"reason\": str|null} per input line.")
    p.add_argument("file", help="a JSON-lines file, or - for standard input")
    p.set_defaults(func=run)


def validate_lines(stream, out) -> tuple[int, int]:
    """Validate every line of a binary stream; write verdicts to ``out`` (binary). Returns (ok, bad)."""
    now = now_ms()
    good = bad = 0
    for n, line in enumerate(stream, 1):
        line = line.rstrip(b"\r\n")
        reason = None
        if not line.strip():
            reason = "empty line"
        else:
            try:
                decode(line, now=now)
            except ContractError as e:
                reason = e.reason
        if reason is None:
            good += 1
        else:
            bad += 1
        out.write(orjson.dumps({"line": n, "ok": reason is None, "reason": reason}) + b"\n")
    return good, bad


def run(args: argparse.Namespace) -> int:
    if args.file == "-":
        good, bad = validate_lines(sys.stdin.buffer, sys.stdout.buffer)
    else:
        try:
            fh = open(args.file, "rb")
        except OSError as e:
            from ..cli import CliError

            raise CliError(f"cannot open {args.file}: {e.strerror}") from None
        with fh:
            good, bad = validate_lines(fh, sys.stdout.buffer)
    sys.stdout.flush()
    print(f"{good} valid, {bad} invalid", file=sys.stderr)
    return 0 if bad == 0 else 1
