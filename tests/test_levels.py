"""Load levels: per-level verdicts by the launch rule and the crossover they locate."""

from __future__ import annotations

from logpipe.analysis.levels import Level, crossover, judge_levels, shared_levels

C1, C4, C16, C64 = (Level(float(c), None) for c in (1, 4, 16, 64))


def arm(name: str, by_level: dict[Level, list[float]]) -> list[tuple[str, dict]]:
    """Launches ``name-r1``, ``name-r2``...: each level's output throughput per round."""
    rounds = len(next(iter(by_level.values())))
    return [(f"{name}-r{i + 1}", {lv: {"output_throughput": vals[i]}
                                  for lv, vals in by_level.items()}) for i in range(rounds)]


def judged(base: dict[Level, list[float]], cand: dict[Level, list[float]]) -> list:
    return judge_levels(arm("base", base), arm("spec", cand), "output_throughput",
                        paired=True, alpha=0.05, threshold=0.03)


def test_levels_are_ordered_by_load_and_shared_by_every_launch() -> None:
    rate = Level(16.0, 8.0)
    assert sorted([C16, Level(None, 8.0), C1, rate], key=lambda lv: lv.load) == [
        C1, rate, C16, Level(None, 8.0)]
    assert rate.label == "concurrency 16, rate 8/s" and Level(None, None).label == "unbounded"
    a = [{C1: {}, C4: {}}, {C1: {}, C4: {}, C16: {}}]
    assert shared_levels([a, [{C4: {}, C1: {}, C16: {}}]]) == [C1, C4]


def test_speculation_that_pays_at_low_load_and_costs_at_high_load_has_a_crossover() -> None:
    base = {C1: [100, 102, 101], C4: [300, 305, 298], C16: [800, 790, 810],
            C64: [1500, 1480, 1510]}
    spec = {C1: [150, 151, 149], C4: [390, 400, 392], C16: [805, 780, 820],
            C64: [1050, 1040, 1070]}
    results = judged(base, spec)
    assert [r.test.verdict for r in results] == [
        "improvement", "improvement", "no significant change", "regression"]
    assert all(r.test.method == "paired rounds" for r in results)
    said = crossover(results)
    assert said is not None
    assert said == ("the candidate pays up to concurrency 4 (+31% to +49% client output "
                    "throughput); from concurrency 64 it costs (-30%): break-even between them")


def test_no_crossover_in_range_is_said_as_such() -> None:
    base = {C1: [100, 101, 99], C4: [300, 302, 298]}
    faster = {C1: [130, 131, 129], C4: [360, 363, 357]}
    assert crossover(judged(base, faster)) == (
        "the candidate pays at every level measured (concurrency 1 to concurrency 4: +30% to "
        "+20% client output throughput); no crossover in range".replace(
            "+30% to +20%", "+20% to +30%"))
    same = {C1: [100, 102, 98], C4: [301, 297, 300]}
    assert crossover(judged(base, same)) == (
        "no level differs significantly (concurrency 1 to concurrency 4): no crossover in "
        "range")


def test_one_launch_a_side_cannot_locate_a_crossover() -> None:
    results = judged({C1: [100], C4: [300]}, {C1: [150], C4: [200]})
    assert [r.test.method for r in results] == ["unreplicated"] * 2
    assert (crossover(results) or "").startswith("no crossover located: no level has the "
                                                 "launches to judge it")


def test_interleaved_levels_locate_no_crossover() -> None:
    base = {C1: [100, 101, 99], C4: [300, 302, 298], C16: [800, 805, 795]}
    spec = {C1: [70, 71, 69], C4: [390, 393, 387], C16: [560, 565, 555]}
    said = crossover(judged(base, spec)) or ""
    assert said.startswith("no crossover located: better and worse levels interleave")


def test_a_level_that_pays_alone_is_named_without_locating_a_break_even() -> None:
    base = {C1: [100, 130, 115], C4: [300, 302, 298], C16: [800, 805, 795]}
    spec = {C1: [105, 120, 118], C4: [301, 297, 303], C16: [1000, 1010, 990]}
    assert crossover(judged(base, spec)) == (
        "the candidate pays at concurrency 16 (+25% client output throughput); no other "
        "level differs significantly: the intervals do not locate a break-even")
