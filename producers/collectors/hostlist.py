"""Slurm hostlist expressions: ``gpu[01-04,07],cpu1`` <-> ``[gpu01, gpu02, gpu03, gpu04, gpu07, cpu1]``.

The grammar is Slurm's (``src/common/hostlist.c``): comma-separated items at the top level;
each item is literal text with any number of ``[...]`` groups; a group is a comma list of
numbers or ``lo-hi`` ranges, and a range keeps the zero padding of its lower bound
(``[08-11]`` -> ``08 09 10 11``). Several groups form the Cartesian product, left to
right (``r[1-2]n[1-2]`` -> ``r1n1 r1n2 r2n1 r2n2``).
"""

from __future__ import annotations

__all__ = ["HostlistError", "expand", "compress"]

#: refuse absurd expansions (a typo like ``n[1-99999999]`` must not eat the collector's memory)
MAX_HOSTS = 1_000_000


class HostlistError(ValueError):
    """A hostlist expression Slurm would not accept; the message quotes it."""


def _split_top(expr: str) -> list[str]:
    items, depth, cur = [], 0, []
    for ch in expr:
        if ch == "[":
            depth += 1
            if depth > 1:
                raise HostlistError(f"nested '[' in hostlist {expr!r}")
        elif ch == "]":
            depth -= 1
            if depth < 0:
                raise HostlistError(f"unbalanced ']' in hostlist {expr!r}")
        if ch == "," and depth == 0:
            items.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    if depth:
        raise HostlistError(f"unclosed '[' in hostlist {expr!r}")
    items.append("".join(cur))
    return [i.strip() for i in items if i.strip()]


def _group(body: str, expr: str) -> list[str]:
    out: list[str] = []
    for part in body.split(","):
        part = part.strip()
        if not part:
            raise HostlistError(f"empty range in hostlist {expr!r}")
        lo, sep, hi = part.partition("-")
        if not lo.isdigit() or (sep and not hi.isdigit()):
            raise HostlistError(f"bad range {part!r} in hostlist {expr!r}")
        if not sep:
            out.append(lo)
            continue
        a, b = int(lo), int(hi)
        if b < a:
            raise HostlistError(f"range {part!r} goes down in hostlist {expr!r}")
        if b - a + 1 > MAX_HOSTS:
            raise HostlistError(f"range {part!r} expands to more than {MAX_HOSTS} hosts")
        width = len(lo)
        out.extend(str(n).zfill(width) for n in range(a, b + 1))
    return out


def _expand_item(item: str, expr: str) -> list[str]:
    results = [""]
    i = 0
    while i < len(item):
        j = item.find("[", i)
        if j < 0:
            results = [r + item[i:] for r in results]
            break
        k = item.index("]", j)
        prefix = item[i:j]
        choices = _group(item[j + 1:k], expr)
        if len(results) * len(choices) > MAX_HOSTS:
            raise HostlistError(f"hostlist {expr!r} expands to more than {MAX_HOSTS} hosts")
        results = [r + prefix + c for r in results for c in choices]
        i = k + 1
    return results


def expand(expr: str | None) -> list[str]:
    """Host names of a Slurm hostlist expression, in order, duplicates kept once.

    ``None``, ``""`` and Slurm's ``(null)`` / ``None assigned`` give ``[]``.
    Raises ``HostlistError`` for malformed input.
    """
    if not expr or expr in ("(null)", "None assigned", "None"):
        return []
    seen: dict[str, None] = {}
    for item in _split_top(expr.strip()):
        for host in _expand_item(item, expr):
            seen.setdefault(host, None)
    return list(seen)


def compress(hosts: list[str]) -> str:
    """The inverse of ``expand`` for one trailing number per name: ``[n1, n2, n3, m]`` -> ``m,n[1-3]``.

    Names are grouped by prefix and zero-pad width; order of prefixes is sorted.
    """
    import re

    groups: dict[tuple[str, int], list[int]] = {}
    plain: list[str] = []
    parsed: list[tuple[str, str]] = []
    padded: set[str] = set()  # prefixes with zero-padded numbers: group those by digit count
    for h in dict.fromkeys(hosts):
        m = re.fullmatch(r"(.*?)(\d+)", h)
        if not m:
            plain.append(h)
            continue
        parsed.append((m.group(1), m.group(2)))
        if len(m.group(2)) > 1 and m.group(2).startswith("0"):
            padded.add(m.group(1))
    for prefix, digits in parsed:
        width = len(digits) if prefix in padded else 0
        groups.setdefault((prefix, width), []).append(int(digits))
    out = sorted(plain)
    for (prefix, width), nums in sorted(groups.items()):
        nums = sorted(set(nums))
        if len(nums) == 1:
            out.append(f"{prefix}{str(nums[0]).zfill(width)}")
            continue
        ranges, start, prev = [], nums[0], nums[0]
        for n in nums[1:] + [None]:  # type: ignore[list-item]
            if n is not None and n == prev + 1:
                prev = n
                continue
            a, b = str(start).zfill(width), str(prev).zfill(width)
            ranges.append(a if start == prev else f"{a}-{b}")
            if n is not None:
                start = prev = n
        out.append(f"{prefix}[{','.join(ranges)}]")
    return ",".join(out)
