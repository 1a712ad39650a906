"""argparse types for sizes that must be positive (``--nodes 0`` made the demo wait for a
fleet that never came; ``simulate --hours -1`` wrote nothing and exited 0)."""

from __future__ import annotations

import argparse
import math


def positive_int(text: str) -> int:
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if v < 1:
        raise argparse.ArgumentTypeError(f"{v} is not positive: give 1 or more")
    return v


def positive_float(text: str) -> float:
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not math.isfinite(v) or v <= 0:
        raise argparse.ArgumentTypeError(f"{text} is not a positive number")
    return v
