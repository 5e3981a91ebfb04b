"""Change points in a history of per-run numbers (E-Divisive means, Student's t-test).

The method of Apache Otava (Fleming et al., ICPE'23), written for numpy/scipy: split a
series where the energy-distance statistic between the two sides is largest, keep the
split when a two-sample t-test between the sides is significant (a first pass at a looser
level), recurse into both sides, then merge: repeatedly drop the weakest change point while
its p-value (re-tested between its neighbours) is above the final level or its magnitude
is below a floor.  Deterministic: no permutations.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.special import stdtr

from logpipe.stats import welch


@dataclass
class ChangePoint:
    index: int
    """First point of the new regime."""
    p_value: float
    mean_before: float
    mean_after: float

    @property
    def magnitude(self) -> float:
        """Relative change of the mean: after / before − 1."""
        return self.mean_after / self.mean_before - 1 if self.mean_before else float("inf")


def _energy_split(x: np.ndarray, min_size: int) -> int | None:
    """The split ``k`` maximising the E-divisive statistic
    ``k(n−k)/n · (2·mean|a−b| − mean|a−a'| − mean|b−b'|)``, every split at once in O(n²):
    the within and cross sums of the distance matrix come from prefix sums of its rows
    and of its lower triangle, not from the submatrices of each split."""
    n = len(x)
    if n < 2 * min_size:
        return None
    d = np.abs(x[:, None] - x[None, :])
    rows = np.concatenate([[0.0], np.cumsum(d.sum(axis=1))])  # R[k] = sum(d[:k, :])
    lower = np.tril(d, -1).sum(axis=1)  # sum_{j<i} d[i, j]
    within_a = np.concatenate([[0.0], np.cumsum(2 * lower)])  # sum(d[:k, :k])
    k = np.arange(min_size, n - min_size + 1)
    total = rows[n]
    a = within_a[k]
    cross = rows[k] - a  # sum(d[:k, k:])
    b = total - 2 * rows[k] + a  # sum(d[k:, k:])
    q = k * (n - k) / n * (2 * cross / (k * (n - k)) - a / k**2 - b / (n - k) ** 2)
    return int(k[int(np.argmax(q))])


def _t_p(a: np.ndarray, b: np.ndarray) -> float:
    if len(a) < 2 or len(b) < 2:
        return 1.0
    scale = max(abs(a.mean()), abs(b.mean()), 1e-12)
    if np.std(a) <= 1e-9 * scale and np.std(b) <= 1e-9 * scale:  # constant sides
        return 0.0 if not np.isclose(a.mean(), b.mean()) else 1.0
    return welch_p(a, b)


def welch_p(a: np.ndarray, b: np.ndarray) -> float:
    """The two-sided p-value of Welch's t-test of ``a`` against ``b`` (two or more values
    each, not both constant): ``scipy.stats.ttest_ind(a, b, equal_var=False)``'s, from
    the t distribution's tail in ``scipy.special`` (``scipy.stats`` costs ~0.8 s to
    import, once per ``check``)."""
    se, df = welch(a, b)
    return float(2 * stdtr(df, -abs(float(a.mean() - b.mean())) / se))


def change_points(values: list[float] | np.ndarray, *, p_value: float = 0.001,
                  min_magnitude: float = 0.0, min_size: int = 3) -> list[ChangePoint]:
    """Change points of ``values`` (in order), weakest dropped until all are significant."""
    x = np.asarray(values, dtype=float)
    found: set[int] = set()

    def split(lo: int, hi: int) -> None:
        k = _energy_split(x[lo:hi], min_size)
        if k is None:
            return
        if _t_p(x[lo:lo + k], x[lo + k:hi]) < p_value * 10:
            found.add(lo + k)
            split(lo, lo + k)
            split(lo + k, hi)

    split(0, len(x))
    points = sorted(found)
    while points:
        bounds = [0, *points, len(x)]
        scored = []
        for i, cp in enumerate(points):
            before, after = x[bounds[i]:cp], x[cp:bounds[i + 2]]
            p = _t_p(before, after)
            mag = abs(after.mean() / before.mean() - 1) if before.mean() else np.inf
            scored.append((p, -mag, cp))
        worst = max(scored)
        p, neg_mag, cp = worst
        if p >= p_value or -neg_mag < min_magnitude:
            points.remove(cp)
            continue
        break
    bounds = [0, *points, len(x)]
    out = []
    for i, cp in enumerate(points):
        before, after = x[bounds[i]:cp], x[cp:bounds[i + 2]]
        out.append(ChangePoint(cp, _t_p(before, after), float(before.mean()),
                               float(after.mean())))
    return out


@dataclass
class HistoryVerdict:
    status: str  # regression | ok | insufficient data
    detail: str
    points: list[ChangePoint]


def judge_history(values: list[float], *, threshold: float = 0.03, min_points: int = 6,
                  p_value: float = 0.001) -> HistoryVerdict:
    """Regression when the latest ≥ 2 points sit after the last change point and its mean
    is lower than the mean before it by more than ``threshold`` (higher is better)."""
    if len(values) < min_points:
        return HistoryVerdict("insufficient data",
                              f"{len(values)} run(s); need ≥ {min_points} for change points", [])
    points = change_points(values, p_value=p_value, min_magnitude=threshold)
    if not points:
        return HistoryVerdict("ok", "no change point", [])
    last = points[-1]
    after = len(values) - last.index
    if after >= 2 and last.magnitude < -threshold:
        return HistoryVerdict("regression", f"{last.magnitude * 100:+.1f}% at run #{last.index + 1}"
                              f" (p = {last.p_value:.2g}), holding for the last {after} runs",
                              points)
    return HistoryVerdict("ok", f"last change {last.magnitude * 100:+.1f}% at run "
                          f"#{last.index + 1}", points)
