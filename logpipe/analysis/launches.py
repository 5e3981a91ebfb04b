"""The launch is the unit (statistics.md §2b): verdicts on one value per launch and stratum.

The lines of one launch are repeated, autocorrelated measurements of one condition; what
decides whether a difference is real is how much two launches of the *same* configuration
differ.  So every verdict here is decided on per-launch values (the steady median of a
launch at one running-request level), on the log scale:

- **paired rounds** (both arms have k ≥ 2 launches, paired by round): the per-round log
  ratios, their mean with a Student-t 95% interval (df = k − 1); with k ≥ 6 the p-value is
  an exact sign-flip test over the rounds (2^k arrangements), which needs no normality;
- **Welch** (arms of different sizes, each ≥ 2): Welch's t on the per-launch log values;
- **launch noise** (an arm of one launch): the difference against the environment's
  measured launch noise (:class:`Noise`, the ``launch_noise`` view's pooled spread);
- **unreplicated** (one launch each, no noise measured): the within-launch verdict stands,
  labelled ``unreplicated: launch noise unknown``.

A replicated change is called an improvement or a regression only when p < α, the ratio is
beyond the practical threshold δ and its 95% interval lies entirely beyond 1 ± δ: the same
three conditions as the within-launch rule (:mod:`logpipe.stats`), on launches.
Pure: numbers in, a :class:`LaunchTest` out; the database side is :func:`noise_for`.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from scipy.special import fdtri, stdtr, stdtrit

from logpipe.stats import decide, welch

MIN_LAUNCH_LINES = 3
"""Steady decode lines a launch needs at a stratum for its median there to count as the
launch's value (the ``launch_values`` view applies the same floor)."""

UNREPLICATED = "unreplicated: launch noise unknown"
UNREPLICATED_HINT = "`logpipe ab --rounds 3` measures the launch noise of this environment"
SIGN_FLIP_MIN_ROUNDS = 6
EXACT_SIGN_FLIP_MAX = 16
"""Up to this many rounds the sign-flip test enumerates every arrangement; beyond, it
draws a fixed-seed sample of 2^16 of them."""


@dataclass(frozen=True)
class Noise:
    """How much the log per-launch median varies between launches of one configuration."""

    log_sd: float
    df: int
    launches: int
    pairs: int
    configurations: int
    pair_diffs: tuple[float, ...] = ()
    """|log difference| of every A/A pair: the empirical distribution a launch judged
    alone is held against (launch noise has heavy tails: a neighbour on the box)."""
    history: tuple[tuple[str, tuple[float, ...]], ...] = ()
    """The log values of each configuration's repeat launches (:func:`pool_noise` given
    labelled groups): what a launch judged alone is checked against (:func:`out_of_family`)."""

    def launches_of(self, label: str | None) -> tuple[float, ...]:
        return next((logs for name, logs in self.history if name == label), ())

    def empirical_p(self, diff: float) -> float | None:
        """The share of this environment's A/A pairs that differ at least as much as
        ``diff`` (add-one, so never 0); None without pairs."""
        if not self.pair_diffs:
            return None
        beyond = sum(1 for x in self.pair_diffs if x >= abs(diff) - 1e-12)
        return (1 + beyond) / (1 + len(self.pair_diffs))

    def describe(self) -> str:
        return (f"launch noise ±{(math.exp(self.log_sd) - 1) * 100:.1f}% (1 SD) measured on "
                f"{self.pairs} A/A pair(s) of {self.launches} launches in "
                f"{self.configurations} configuration(s) of this environment")


def pool_noise(groups: Sequence[Sequence[float]] | Mapping[str, Sequence[float]]
               ) -> Noise | None:
    """The pooled spread of log values over groups of repeat launches (each group one
    configuration, workload and stratum; labelled by configuration when a mapping, which
    keeps each one's launches as its history); None when no group has two launches, or
    when every repeat gave exactly the same value (copies of one log, not launches: a
    spread of zero would make any difference significant)."""
    labelled = (list(groups.items()) if isinstance(groups, Mapping)
                else [("", g) for g in groups])
    kept = [(label, g) for label, g in ((label, _distinct_launches(g)) for label, g in labelled)
            if len(g) >= 2]
    usable = [g for _, g in kept]
    if not usable:
        return None
    df = sum(len(g) - 1 for g in usable)
    ss = sum(float(np.sum((g - g.mean()) ** 2)) for g in usable)
    if ss <= 0:
        return None
    diffs = tuple(sorted(abs(float(x - y)) for g in usable
                         for x, y in itertools.combinations(g, 2)))
    history = (tuple((label, tuple(float(x) for x in g)) for label, g in kept)
               if isinstance(groups, Mapping) else ())
    return Noise(math.sqrt(ss / df), df, sum(len(g) for g in usable),
                 sum(len(g) * (len(g) - 1) // 2 for g in usable), len(usable), diffs,
                 history)


def _distinct_launches(values: Sequence[float]) -> np.ndarray:
    """The log values of one group of repeat launches, a value repeated exactly counted
    once: two launches never give the same median to the last digit, a copy of one log
    (a relay, a re-ingested paste) does, and a spread of zero is not a measurement."""
    logs = np.log(np.asarray([v for v in values if v and v > 0], dtype=float))
    return np.unique(np.round(logs, 12))


POOL_F_QUANTILE = 0.95
"""A campaign's own round-to-round variance is pooled with the environment's launch noise
unless it is larger than the environment's at this F quantile (the campaign is then
noisier than the environment's A/A pairs say, and is judged on its own rounds)."""


OUT_OF_FAMILY = "out of family"
OUT_OF_FAMILY_ALPHA = 0.01
"""A launch judged alone is checked against the earlier launches of its own configuration
in this environment: outside their 99% prediction interval it is out of family (a busy
neighbour, a stall, a cold cache), and one disturbed launch cannot be told from a change.
Measured: one launch in 14 of a quiet real recording ran at 0.35x; without this check,
13.8% of one-launch A/A campaigns judged against the environment's noise were called
regressions or improvements (``benchmarks/calibration.py``)."""


def out_of_family(value: float, history: Sequence[float], noise: Noise
                  ) -> tuple[float, float, int] | None:
    """(low, high, n) of the prediction interval of a new launch of a configuration from
    its ``history`` (log values of its other launches, ``value``'s own left out) and the
    environment's pooled launch noise, when ``value`` lies outside it; None when it lies
    inside or fewer than two other launches are known."""
    own = round(math.log(value), 12)
    h = np.array([x for x in history if round(x, 12) != own], dtype=float)
    if len(h) < 2 or noise.log_sd <= 0 or noise.df < 1:
        return None
    half = (float(stdtrit(noise.df, 1 - OUT_OF_FAMILY_ALPHA / 2)) * noise.log_sd
            * math.sqrt(1 + 1 / len(h)))
    centre = float(h.mean())
    if abs(math.log(value) - centre) <= half:
        return None
    return math.exp(centre - half), math.exp(centre + half), len(h)


@dataclass
class LaunchTest:
    """The launch-level outcome for one metric (candidate arm ``b`` against ``a``)."""

    method: str  # paired rounds | welch | launch noise | unreplicated | insufficient data
    names_a: list[str]
    names_b: list[str]
    values_a: list[float | None]
    values_b: list[float | None]
    ratio: float | None = None
    """exp(mean log difference): the candidate's typical launch over the reference's."""
    ci_low: float | None = None
    ci_high: float | None = None
    p_value: float | None = None
    df: float | None = None
    round_ratios: list[float] = field(default_factory=list)
    verdict: str = "insufficient data"
    detail: str = ""
    label: str | None = None
    disagreeing: str | None = None
    """A round whose ratio is far from the others', named (paired rounds only)."""
    pooled: str = ""
    """How the environment's launch noise was pooled with the rounds' own (or why not)."""

    def typical(self) -> tuple[float, float] | None:
        """Each arm's typical launch: the geometric mean of its launch values (the scale
        the verdict is taken on); None where an arm has none."""
        va = [float(v) for v in self.values_a if v and v > 0]
        vb = [float(v) for v in self.values_b if v and v > 0]
        if not va or not vb:
            return None
        return float(np.exp(np.mean(np.log(va)))), float(np.exp(np.mean(np.log(vb))))

    @property
    def launches(self) -> tuple[int, int]:
        return (sum(v is not None for v in self.values_a),
                sum(v is not None for v in self.values_b))


def _t_interval(mean: float, se: float, df: float, alpha: float) -> tuple[float, float, float]:
    """(low, high, two-sided p) of a mean log difference with standard error ``se``."""
    if se == 0:
        return math.exp(mean), math.exp(mean), (1.0 if mean == 0 else 0.0)
    # (Student's t through scipy.special: what scipy.stats.t.ppf and .sf call, without
    # their distribution wrappers, ~1 us a value against ~40 us)
    crit = float(stdtrit(df, 1 - alpha / 2))
    p = float(2 * stdtr(df, -(abs(mean) / se)))
    return math.exp(mean - crit * se), math.exp(mean + crit * se), p


def sign_flip_p(diffs: Sequence[float] | np.ndarray, seed: int = 20_260_504) -> float:
    """Exact two-sided sign-flip permutation p of the mean of ``diffs`` (the rounds' log
    ratios): the share of the 2^k sign arrangements whose |mean| is at least the
    observed one.  Smallest attainable: 2 / 2^k."""
    d = np.asarray(diffs, dtype=float)
    k = len(d)
    observed = abs(d.mean()) - 1e-12
    if k <= EXACT_SIGN_FLIP_MAX:
        signs = np.array(list(itertools.product((1.0, -1.0), repeat=k)))
    else:
        rng = np.random.default_rng(seed)
        signs = rng.choice((1.0, -1.0), size=(1 << 16, k))
    means = np.abs(signs @ d) / k
    return float(np.mean(means >= observed))


def _disagreeing(names: Sequence[str], diffs: np.ndarray, threshold: float) -> str | None:
    """Name a round whose log ratio is far from the others' (leave-one-out)."""
    k = len(diffs)
    floor = math.log1p(2 * threshold)
    if k == 2:
        gap = abs(diffs[0] - diffs[1])
        if gap > max(floor, abs(diffs.mean())):
            return (f"the two rounds disagree (ratios {math.exp(diffs[0]):.3f} and "
                    f"{math.exp(diffs[1]):.3f}): more rounds would tell")
        return None
    worst, worst_gap = None, 0.0
    for i in range(k):
        others = np.delete(diffs, i)
        spread = float(np.std(others, ddof=1)) if len(others) > 1 else 0.0
        gap = abs(diffs[i] - others.mean())
        if gap > max(floor, 4 * spread) and gap > worst_gap:
            worst, worst_gap = i, gap
    if worst is None:
        return None
    return (f"round {worst + 1} ({names[worst]}) disagrees with the others: ratio "
            f"{math.exp(diffs[worst]):.3f} against {math.exp(np.delete(diffs, worst).mean()):.3f}"
            " for the rest")


def _borrow(d: np.ndarray, noise: Noise | None) -> tuple[float, float, str] | None:
    """Standard error, degrees of freedom and a description of the mean round log ratio
    judged with the launch variance pooled over the environment's A/A pairs and the
    campaign's own rounds (statistics.md §2c): ``s² = (K s_env² + (R−1) s_rounds²) /
    (K + R − 1)``, ``se = s √(2/R)``, ``t(K + R − 1)``; s_rounds² is half the variance of
    the round log ratios (each is the difference of two launches).  None without a
    measured noise, or when the rounds are far noisier than the environment's pairs."""
    if noise is None or noise.df < 1 or noise.log_sd <= 0:
        return None
    r = len(d)
    s_rounds2 = float(np.var(d, ddof=1)) / 2
    s_env2 = noise.log_sd ** 2
    if s_rounds2 / s_env2 > float(fdtri(r - 1, noise.df, POOL_F_QUANTILE)):
        return None
    df = noise.df + r - 1
    s2 = (noise.df * s_env2 + (r - 1) * s_rounds2) / df
    return (math.sqrt(s2) * math.sqrt(2 / r), float(df),
            f"launch noise pooled: {noise.pairs} A/A pair(s) of this environment (df "
            f"{noise.df}) with the {r} rounds (df {r - 1}): t({df})")


def _rounds_agree(t: LaunchTest, d: np.ndarray, names: Sequence[str]) -> None:
    """A replicated regression or improvement needs every round to point its way: with
    few rounds, one launch hit by something else (a busy neighbour, a stall) makes a
    large mean from one round, and a t interval built on normal noise would call it."""
    if t.verdict not in ("regression", "improvement") or len(d) >= SIGN_FLIP_MIN_ROUNDS:
        return
    sign = 1.0 if t.ratio is not None and t.ratio > 1 else -1.0
    against = [f"{n} ({math.exp(x):.3f})" for n, x in zip(names, d, strict=True)
               if x * sign <= 0]
    if against:
        t.detail = (f"not replicated: round(s) {', '.join(against)} point the other way "
                    f"(the mean ratio {t.ratio:.3f} rests on the other rounds)")
        t.verdict = "no significant change"


def _strays(t: LaunchTest, arms: Sequence[tuple[Sequence[tuple[str, float]], str | None]],
            noise: Noise) -> None:
    """An arm of one launch that is out of family with its configuration's earlier
    launches makes the verdict inconclusive, whatever it would have read."""
    strays = []
    for launches, label in arms:
        if len(launches) != 1 or label is None:
            continue
        name, value = launches[0]
        found = out_of_family(value, noise.launches_of(label), noise)
        if found is not None:
            lo, hi, n = found
            strays.append(f"{name} ({value:.4g}) lies outside the {n} other launches of its "
                          f"configuration here (99% prediction {lo:.4g}-{hi:.4g})")
    if not strays:
        return
    t.detail = ("; ".join(strays) + ": one disturbed launch cannot be told from a change "
                f"(it would read: {t.verdict}, ratio {t.ratio:.3f}); {UNREPLICATED_HINT}")
    t.verdict, t.label = "insufficient data", OUT_OF_FAMILY


def _decide(t: LaunchTest, higher_is_better: bool | None, alpha: float,
            threshold: float) -> None:
    assert t.ratio is not None and t.ci_low is not None and t.ci_high is not None
    t.verdict, t.detail = decide(t.ratio, t.ci_low, t.ci_high,
                                 t.p_value if t.p_value is not None else 1.0, alpha=alpha,
                                 threshold=threshold, higher_is_better=higher_is_better,
                                 unit=" across launches")


def judge_launches(names_a: Sequence[str], values_a: Sequence[float | None],
                   names_b: Sequence[str], values_b: Sequence[float | None], *,
                   higher_is_better: bool | None, paired: bool, noise: Noise | None,
                   within: Any = None, alpha: float = 0.05,
                   threshold: float = 0.03,
                   configs: tuple[str | None, str | None] = (None, None)) -> LaunchTest:
    """Candidate arm ``b`` against reference arm ``a``, one value per launch (None: the
    launch has no value for this metric).  ``paired``: the i-th launches of the arms are
    one round.  ``within``: the within-launch :class:`logpipe.stats.Test`, whose verdict
    stands (labelled) when neither replication nor a measured noise can judge.
    ``configs``: each arm's configuration label, whose earlier launches in ``noise``'s
    history an arm of one launch is checked against (:func:`out_of_family`)."""
    t = LaunchTest("insufficient data", list(names_a), list(names_b), list(values_a),
                   list(values_b))
    a = [(n, float(v)) for n, v in zip(names_a, values_a, strict=True) if v and v > 0]
    b = [(n, float(v)) for n, v in zip(names_b, values_b, strict=True) if v and v > 0]
    if not a or not b:
        t.detail = ("no launch value in " + ("either arm" if not a and not b else
                                             "the reference arm" if not a else
                                             "the candidate arm")
                    + f" (a launch needs ≥ {MIN_LAUNCH_LINES} steady lines for its median)")
        return t
    la = np.log([v for _, v in a])
    lb = np.log([v for _, v in b])
    rounds = paired and len(values_a) == len(values_b) and len(values_a) >= 2
    if rounds:
        pairs = [(na, math.log(va), math.log(vb))
                 for na, va, vb in zip(names_a, values_a, values_b, strict=True)
                 if va and vb and va > 0 and vb > 0]
        if len(pairs) >= 2:
            d = np.array([y - x for _, x, y in pairs])
            k = len(d)
            mean = float(d.mean())
            se = float(np.std(d, ddof=1)) / math.sqrt(k)
            t.method, t.df = "paired rounds", k - 1
            t.ratio = math.exp(mean)
            t.ci_low, t.ci_high, t.p_value = _t_interval(mean, se, k - 1, alpha)
            borrowed = _borrow(d, noise)
            if borrowed is not None:
                se, df, t.pooled = borrowed
                t.method, t.df = "paired rounds + environment noise", df
                t.ci_low, t.ci_high, t.p_value = _t_interval(mean, se, df, alpha)
            elif k >= SIGN_FLIP_MIN_ROUNDS:
                t.p_value = sign_flip_p(d)
            t.round_ratios = [float(math.exp(x)) for x in d]
            t.disagreeing = _disagreeing([n for n, _, _ in pairs], d, threshold)
            _decide(t, higher_is_better, alpha, threshold)
            if t.pooled:
                t.detail += f"; {t.pooled}"
            _rounds_agree(t, d, [n for n, _, _ in pairs])
            return t
    mean = float(lb.mean() - la.mean())
    t.ratio = math.exp(mean)
    if len(la) >= 2 and len(lb) >= 2:
        se, df = welch(la, lb)
        t.method, t.df = "welch", df
        t.ci_low, t.ci_high, t.p_value = _t_interval(mean, se, df, alpha)
        _decide(t, higher_is_better, alpha, threshold)
        return t
    if noise is not None:
        se = noise.log_sd * math.sqrt(1 / len(la) + 1 / len(lb))
        t.method, t.df = "launch noise", noise.df
        t.ci_low, t.ci_high, t.p_value = _t_interval(mean, se, noise.df, alpha)
        empirical = noise.empirical_p(mean) if len(noise.pair_diffs) + 1 >= 1 / alpha else None
        if empirical is not None and empirical > t.p_value:
            # the t model's tails are thinner than real launch noise's: where there are
            # enough A/A pairs for it to reach α, a launch is held against the
            # environment's own A/A differences too, and the larger p stands
            t.p_value = empirical
        _decide(t, higher_is_better, alpha, threshold)
        t.detail += (f"; against the {noise.describe()}"
                     + (f" (p {empirical:.2g}: the share of its A/A pairs that differ as "
                        "much)" if empirical is not None else ""))
        _strays(t, [(a, configs[0]), (b, configs[1])], noise)
        return t
    t.method, t.label = "unreplicated", UNREPLICATED
    size = f"{(t.ratio - 1) * 100:+.1f}%"
    if within is not None and within.verdict != "insufficient data":
        t.verdict = within.verdict
        t.detail = f"{size}, judged within launch only ({UNREPLICATED}; {UNREPLICATED_HINT})"
    elif within is not None:
        t.verdict = "insufficient data"
        t.detail = f"{size}; within launch: {within.detail} ({UNREPLICATED})"
    else:
        beyond = abs(t.ratio - 1) > threshold
        t.verdict = ("no significant change" if not beyond or higher_is_better is None else
                     "improvement" if (t.ratio > 1) == higher_is_better else "regression")
        t.detail = f"{size} against the ±{threshold * 100:g}% threshold ({UNREPLICATED})"
    return t
