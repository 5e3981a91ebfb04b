"""The statistics behind every verdict, and nothing else (reference: statistics.md).

A change is called an improvement or a regression only when all three hold:
1. a two-sided Mann–Whitney U test gives p < α — computed only when the sample sizes can
   reach α at all (the smallest two-sided p is ``2 / C(n+m, n)``);
2. the ratio of medians (candidate / reference) is beyond the practical threshold δ;
3. the bootstrap 95% confidence interval of that ratio lies entirely beyond 1 ± δ.
Everything is deterministic: resampling uses a fixed seed.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

SEED = 20_260_504
RESAMPLES = 10_000


def min_p_two_sided(n: int, m: int) -> float:
    """Smallest two-sided Mann–Whitney p-value attainable with samples of n and m."""
    if n == 0 or m == 0:
        return 1.0
    # 2 / C(n+m, n), in logarithms: the binomial overflows a float beyond ~1,000 samples
    log_comb = math.lgamma(n + m + 1) - math.lgamma(n + 1) - math.lgamma(m + 1)
    return min(1.0, math.exp(math.log(2.0) - log_comb))


def needed_per_run(alpha: float) -> int:
    """Smallest equal sample size per run whose attainable p is below ``alpha``."""
    k = 1
    while min_p_two_sided(k, k) >= alpha:
        k += 1
    return k


BOOTSTRAP_MAX_N = 1000
"""Above this many samples a run is bootstrapped m-out-of-n (see bootstrap_ratio_ci)."""


def bootstrap_ratio_ci(a: np.ndarray, b: np.ndarray, level: float = 0.95,
                       resamples: int = RESAMPLES, seed: int = SEED,
                       max_n: int = BOOTSTRAP_MAX_N) -> tuple[float, float]:
    """Percentile bootstrap CI of median(b) / median(a), resampling each run independently.

    A run with more than ``max_n`` samples (a long server log has tens of thousands of
    decode lines) has its resampled medians drawn from their exact distribution (an order
    statistic's binomial tail, :func:`_log_median_spread`) instead of by drawing every
    sample ``resamples`` times; smaller runs (or a median that is not positive) are
    resampled draw by draw.
    """
    rng = np.random.default_rng(seed)
    med_a, med_b = float(np.median(a)), float(np.median(b))
    if max(len(a), len(b)) > max_n and med_a > 0 and med_b > 0:
        da = _log_median_spread(a, med_a, resamples, rng, max_n)
        db = _log_median_spread(b, med_b, resamples, rng, max_n)
        if da is not None and db is not None:
            log_ratios = math.log(med_b / med_a) + db - da
            tail = (1 - level) / 2 * 100
            lo, hi = np.exp(np.percentile(log_ratios, [tail, 100 - tail]))
            return float(lo), float(hi)
    ratios = np.empty(resamples)
    done = 0
    batch = max(1, min(resamples, 4_000_000 // max(len(a), len(b), 1)))
    while done < resamples:
        k = min(batch, resamples - done)
        # (64-bit draws: numpy gathers by 64-bit indexes, converting narrower ones first;
        # 32-bit draws, the same numbers, drew faster and gathered slower: 5-10% more a
        # bootstrap in all)
        ma = row_medians(np.take(a, rng.integers(0, len(a), (k, len(a)))))
        mb = row_medians(np.take(b, rng.integers(0, len(b), (k, len(b)))))
        with np.errstate(divide="ignore", invalid="ignore"):
            ratios[done:done + k] = mb / ma
        done += k
    ratios = ratios[np.isfinite(ratios)]
    if len(ratios) == 0:
        return (math.nan, math.nan)
    tail = (1 - level) / 2 * 100
    lo, hi = np.percentile(ratios, [tail, 100 - tail])
    return float(lo), float(hi)


def row_medians(x: np.ndarray) -> np.ndarray:
    """``np.median(x, axis=1)``, the same values, by sorting each row: numpy sorts short
    rows of floats with SIMD, 2-4x faster than the partition ``median`` does (a bootstrap
    of 10,000 resamples of a launch's 8-1,000 lines: 1.7 -> 0.4 ms at 8, 65 -> 32 ms at
    1,000).  A row's median is its middle value, or the mean of its middle two, as
    ``median`` computes them.  Rows holding NaN are left to ``median`` (NaN sorts last)."""
    n = x.shape[1]
    if n == 0 or x.dtype.kind != "f" or np.isnan(x).any():
        return np.median(x, axis=1)
    s = np.sort(x, axis=1)
    h = n // 2
    return s[:, h] if n % 2 else (s[:, h - 1] + s[:, h]) / 2


def _log_median_spread(x: np.ndarray, med: float, resamples: int, rng: np.random.Generator,
                       max_n: int) -> np.ndarray | None:
    """Bootstrap deviations of log(median) from log(``med``) for a long run, scaled to
    ``x``'s own length; None when a resampled median is not positive.

    The median of ``m`` draws (``m`` odd) is the ``k``-th smallest draw, ``k = (m+1)/2``,
    so it is at most the ``i``-th smallest value of ``x`` exactly when at least ``k`` draws
    are: a binomial tail.  Medians are drawn from that distribution (inverse CDF) instead
    of by resampling ``m`` values ``resamples`` times: the same bootstrap, in O(n log n).
    ``m`` is ``x``'s length made odd, so no rescaling is left but that of one sample.
    """
    from scipy.stats import binom

    n = len(x)
    m = n if n % 2 else n - 1
    k = (m + 1) // 2
    # P(median <= v) at each distinct value v, i.e. at its last place in sorted order: the
    # draws below land on the same values as with one tail per sample, in O(distinct)
    values, counts = distinct(x)
    cdf = binom.sf(k - 1, m, np.cumsum(counts) / n)
    idx = np.minimum(np.searchsorted(cdf, rng.random(resamples), side="right"),
                     len(values) - 1)
    out = values[idx]
    if not np.all(out > 0):
        return None
    return (np.log(out) - math.log(med)) * math.sqrt(m / n)


def distinct(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The distinct values of ``x`` in ascending order and how many times each occurs (a
    long run's throughputs, printed to two decimals, are a few thousand values)."""
    xs = x if len(x) < 2 or bool(np.all(x[1:] >= x[:-1])) else np.sort(x)
    if len(xs) == 0:
        return xs, np.zeros(0, dtype=np.int64)
    starts = np.flatnonzero(np.concatenate(([True], xs[1:] != xs[:-1])))
    return xs[starts], np.diff(np.append(starts, len(xs)))


def mannwhitney_p(a: np.ndarray, b: np.ndarray) -> float:
    """Two-sided Mann–Whitney U p-value: scipy's own (``mannwhitneyu``) where a sample
    has 8 or fewer values (its exact test where there are no ties) or a NaN; scipy's
    normal approximation, computed as scipy computes it, for 9-1,000
    (:func:`_mannwhitney_normal`); for long runs the same approximation with tie and
    continuity corrections, computed from the distinct values and their counts instead
    of ranking every sample (equal to scipy's to rounding)."""
    n1, n2 = len(a), len(b)
    if min(n1, n2) <= 8 or np.isnan(a).any() or np.isnan(b).any():
        # (scipy's exact test, used at these sizes without ties, and its NaN policy)
        from scipy import stats as sps

        return float(sps.mannwhitneyu(a, b, alternative="two-sided").pvalue)
    if max(n1, n2) <= BOOTSTRAP_MAX_N:
        return _mannwhitney_normal(np.asarray(a, dtype=np.float64),
                                   np.asarray(b, dtype=np.float64))
    va, ca = distinct(a)
    vb, cb = distinct(b)
    both = np.union1d(va, vb)
    ta = np.zeros(len(both))
    ta[np.searchsorted(both, va)] = ca
    t = ta.copy()
    t[np.searchsorted(both, vb)] += cb
    ranks = np.cumsum(t) - t + (t + 1) / 2  # the average rank of each distinct value
    u1 = float(np.sum(ta * ranks)) - n1 * (n1 + 1) / 2
    u = max(u1, n1 * n2 - u1)
    n = n1 + n2
    s = math.sqrt(n1 * n2 / 12 * ((n + 1) - float(np.sum(t ** 3 - t)) / (n * (n - 1))))
    excess = u - n1 * n2 / 2 - 0.5  # continuity correction
    if s == 0:
        return 1.0
    return min(1.0, max(0.0, math.erfc(excess / s / math.sqrt(2))))


def _mannwhitney_normal(a: np.ndarray, b: np.ndarray) -> float:
    """scipy's ``mannwhitneyu(a, b, alternative="two-sided").pvalue`` where it takes its
    normal approximation (both samples over 8), the same float bit for bit, without its
    array wrappers: ~28 us a call against ~410 us (15% of a check judging hundreds of
    pairs).  The rank sum and the tie term are sums of half-integers and integers, exact
    in any order; the rest is scipy's arithmetic in scipy's order, and ``special.ndtr``."""
    from scipy.special import ndtr

    n1, n2 = len(a), len(b)
    n = n1 + n2
    xy = np.concatenate((a, b))
    order = np.argsort(xy, kind="mergesort")
    ranked = xy[order]
    starts = np.flatnonzero(np.concatenate(([True], ranked[1:] != ranked[:-1])))
    counts = np.diff(np.append(starts, n)).astype(np.float64)
    ranks = np.empty(n)
    ranks[order] = np.repeat(starts + (counts + 1) / 2, counts.astype(np.int64))
    u1 = float(np.sum(ranks[:n1])) - n1 * (n1 + 1) / 2
    u = max(u1, n1 * n2 - u1)
    tie_term = float(np.sum(counts ** 3 - counts))
    sd = math.sqrt(n1 * n2 / 12 * ((n + 1) - tie_term / (n * (n - 1))))
    numerator = u - n1 * n2 / 2
    numerator -= 0.5  # continuity correction
    with np.errstate(divide="ignore", invalid="ignore"):
        z = np.float64(numerator) / np.float64(sd)
    return float(np.clip(ndtr(-z) * 2, 0.0, 1.0))


@dataclass
class Test:
    """The outcome of comparing one metric between two runs."""

    n_a: int
    n_b: int
    median_a: float | None
    median_b: float | None
    iqr_a: float | None
    iqr_b: float | None
    ratio: float | None
    ci_low: float | None
    ci_high: float | None
    p_value: float | None
    verdict: str  # improvement | regression | no significant change | insufficient data | info
    detail: str


def welch(a: np.ndarray, b: np.ndarray) -> tuple[float, float]:
    """Welch's standard error of ``mean(b) - mean(a)`` and its degrees of freedom
    (Welch-Satterthwaite), two or more values each; where neither varies, the pooled
    test's degrees of freedom."""
    va, vb = float(np.var(a, ddof=1)) / len(a), float(np.var(b, ddof=1)) / len(b)
    df = ((va + vb) ** 2 / (va ** 2 / (len(a) - 1) + vb ** 2 / (len(b) - 1))
          if va + vb > 0 else float(len(a) + len(b) - 2))
    return math.sqrt(va + vb), df


def _iqr(x: np.ndarray) -> float:
    q1, q3 = np.percentile(x, [25, 75])
    return float(q3 - q1)


def _finite(x: np.ndarray | list[float]) -> np.ndarray:
    arr = np.asarray(x, dtype=float)
    return arr[np.isfinite(arr)]


def compare_samples(a: Any, b: Any, *,
                    higher_is_better: bool | None, alpha: float = 0.05,
                    threshold: float = 0.03) -> Test:
    """Verdict on ``b`` (candidate) against ``a`` (reference).

    ``higher_is_better`` None: the metric has no good direction; a significant change is
    reported as ``info``.
    """
    a = _finite(a)
    b = _finite(b)
    n, m = len(a), len(b)
    med_a = float(np.median(a)) if n else None
    med_b = float(np.median(b)) if m else None
    base = Test(n, m, med_a, med_b, _iqr(a) if n else None, _iqr(b) if m else None,
                None, None, None, None, "insufficient data", "")
    if n == 0 or m == 0:
        base.detail = "no samples in " + ("either run" if n == m else
                                          "the reference" if n == 0 else "the candidate")
        return base
    if med_a:
        base.ratio = med_b / med_a if med_a else None  # type: ignore[operator]
    if min_p_two_sided(n, m) >= alpha:
        k = needed_per_run(alpha)
        base.detail = (f"insufficient data: need ≥ {k} samples per run for α = {alpha:g} "
                       f"(have {n} and {m})")
        return base
    p = mannwhitney_p(a, b)
    base.p_value = p
    if not med_a:
        if not med_b and p >= alpha:
            base.verdict = "no significant change"
            base.detail = "both medians are 0"
        else:
            base.verdict = "info" if higher_is_better is None else "insufficient data"
            base.detail = "reference median is 0: no ratio"
        return base
    lo, hi = bootstrap_ratio_ci(a, b)
    base.ci_low, base.ci_high = lo, hi
    base.verdict, base.detail = decide(base.ratio or 1.0, lo, hi, p, alpha=alpha,
                                       threshold=threshold,
                                       higher_is_better=higher_is_better)
    return base


def decide(ratio: float, lo: float, hi: float, p: float, *, alpha: float, threshold: float,
           higher_is_better: bool | None, unit: str = "") -> tuple[str, str]:
    """The three conditions of a change, for lines or launches alike: ``p`` < α, the ratio
    beyond the practical threshold δ and its 95% interval ``lo``–``hi`` entirely beyond
    1 ± δ.  Returns the verdict and why (``unit`` names what the ratio is across)."""
    size = f"{(ratio - 1) * 100:+.1f}%{unit}"
    beyond = abs(ratio - 1) > threshold
    ci_beyond = lo > 1 + threshold or hi < 1 - threshold
    if p < alpha and beyond and ci_beyond:
        verdict = ("info" if higher_is_better is None else
                   "improvement" if (ratio > 1) == higher_is_better else "regression")
        return verdict, f"{size} (p = {p:.2g}, 95% CI {lo:.3f}–{hi:.3f})"
    why = []
    if p >= alpha:
        why.append(f"p = {p:.2g} ≥ {alpha:g}")
    if not beyond:
        why.append(f"|{(ratio - 1) * 100:+.1f}%| within ±{threshold * 100:g}%")
    elif not ci_beyond:
        why.append(f"95% CI {lo:.3f}–{hi:.3f} reaches into 1 ± {threshold:g}")
    return "no significant change", (f"{size}: " if unit else "") + "; ".join(why)


def compare_proportions(k_a: int, n_a: int, k_b: int, n_b: int, *, alpha: float = 0.05,
                        threshold: float = 0.03) -> Test:
    """Graph coverage and other shares: Fisher's exact test plus a practical threshold on
    the ratio of shares (higher is better)."""
    pa = k_a / n_a if n_a else None
    pb = k_b / n_b if n_b else None
    t = Test(n_a, n_b, pa, pb, None, None, None, None, None, None, "insufficient data", "")
    if not n_a or not n_b:
        t.detail = "no lines to count"
        return t
    t.ratio = (pb / pa) if pa else None  # type: ignore[operator]
    from scipy import stats as sps

    p = float(sps.fisher_exact([[k_a, n_a - k_a], [k_b, n_b - k_b]]).pvalue)
    t.p_value = p
    diff = (pb or 0) - (pa or 0)
    if p < alpha and abs(diff) > threshold:
        t.verdict = "improvement" if diff > 0 else "regression"
        t.detail = f"{pa:.1%} → {pb:.1%} (Fisher p = {p:.2g})"
    else:
        t.verdict = "no significant change"
        t.detail = f"{pa:.1%} → {pb:.1%} (Fisher p = {p:.2g})"
    return t
