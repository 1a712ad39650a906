"""Exact tests the findings use (no scipy): Poisson and binomial upper tails, the
conditional Poisson rate comparison and multiplicity adjustment."""

from __future__ import annotations

import math


def poisson_sf(k: int, mu: float) -> float:
    """P(X >= k) for X ~ Poisson(mu), exact (log-space sums, no scipy)."""
    if k <= 0:
        return 1.0
    if mu <= 0.0:
        return 0.0
    lmu = math.log(mu)

    def lpmf(i: int) -> float:
        return -mu + i * lmu - math.lgamma(i + 1)

    if k > mu:  # sum the upper tail directly; terms fall monotonically past the mode
        first = lpmf(k)
        total, i = 0.0, k
        while True:
            t = math.exp(lpmf(i) - first)
            total += t
            if t < 1e-17 * total or i > k + 100_000:
                break
            i += 1
        return min(1.0, math.exp(first) * total)
    # k <= mu: 1 - CDF(k-1) by log-sum-exp
    logs = [lpmf(i) for i in range(k)]
    m = max(logs)
    cdf = math.exp(m) * sum(math.exp(x - m) for x in logs)
    return min(1.0, max(0.0, 1.0 - cdf))


def binom_sf(k: int, n: int, p: float) -> float:
    """P(X >= k) for X ~ Binomial(n, p), exact (log-space sum of the tail)."""
    if k <= 0:
        return 1.0
    if k > n:
        return 0.0
    if p <= 0.0:
        return 0.0
    if p >= 1.0:
        return 1.0
    lp, lq = math.log(p), math.log1p(-p)
    c = math.lgamma(n + 1)
    logs = [c - math.lgamma(i + 1) - math.lgamma(n - i + 1) + i * lp + (n - i) * lq for i in range(k, n + 1)]
    m = max(logs)
    return min(1.0, math.exp(m) * sum(math.exp(x - m) for x in logs))


def rate_test(c: int, e: float, c_rest: int, e_rest: float, mid_p: bool = False) -> float:
    """One-sided exact p-value that a subject's Poisson rate (``c`` events over exposure
    ``e``) exceeds the rest of its dimension's (``c_rest`` over ``e_rest``).

    Conditioned on the total ``n = c + c_rest``, ``c ~ Binomial(n, e / (e + e_rest))``
    under equal rates: this is the exact Poisson rate-comparison test, and unlike
    ``poisson_sf(c, rate_rest * e)`` it accounts for the fleet rate being estimated
    (with a small fleet count the plug-in Poisson tail is anti-conservative). For a subject
    with a small share of the exposure both agree; ``poisson_sf`` is the limit.
    """
    if e <= 0 or e_rest <= 0:
        return 1.0
    n, q = c + c_rest, e / (e + e_rest)
    p = binom_sf(c, n, q)
    if mid_p:  # Lancaster's mid-p: P(X > c) + P(X = c) / 2, less conservative for small counts
        p -= 0.5 * (p - binom_sf(c + 1, n, q))
    return p


def adjust(pvalues: list[float], method: str = "bh") -> list[float]:
    """Multiplicity-adjusted p-values: Benjamini-Hochberg q-values or Bonferroni."""
    m = len(pvalues)
    if m == 0:
        return []
    if method == "bonferroni":
        return [min(1.0, p * m) for p in pvalues]
    order = sorted(range(m), key=lambda i: pvalues[i])
    out = [1.0] * m
    running = 1.0
    for rank in range(m, 0, -1):
        i = order[rank - 1]
        running = min(running, pvalues[i] * m / rank)
        out[i] = min(1.0, running)
    return out
