"""How often is a verdict wrong?  False-positive rate and power of the launch rule, measured.

Resamples recorded real launches of one configuration into A/A campaigns of R = 1..4
rounds (2R launches drawn without replacement, split into two arms paired by round), and
into campaigns whose candidate arm is scaled down by 5, 10 and 20% (an injected
regression).  Three recordings, each judged on its own (its own environment):

- ``benchmarks/data/real-cpu-aa``: 14 launches of the real SGLang CPU engine recorded with
  ``logpipe ab --record-only`` on this 2-core machine, otherwise idle but for one short
  test run (one launch at 0.35x the others);
- ``benchmarks/data/real-cpu-aa-busy``: 14 launches of the same configuration recorded
  while a test run loaded the machine from round 3 on (launches from 0.1x to 1x);
- the sample campaigns' repeat launches (2 or 3 per configuration, so R = 1 only).

Each campaign is judged by ``logpipe.analysis.launches.judge_launches``, the function ``compare``
decides each metric with, for the two families:

- server: steady decode throughput at the configuration's most common running-request
  level (one stratum: compare's headline adds Holm's correction over several, which only
  lowers its false positives further);
- client: the benchmark's output throughput (compare's default deciding metric).

"borrowed" rows take the environment's launch noise from the launches not drawn (their
pooled spread, statistics.md §2c); "own rounds" rows judge on the campaign alone.  A
false positive is a verdict of regression or improvement that would exit 1 or be printed
as IMPROVEMENT (an unreplicated regression exits 4 and is not counted); power is the share
of injected regressions called regression.  Intervals are Wilson 95%.

    python benchmarks/calibration.py [--draws 2000] [--markdown]
"""

from __future__ import annotations

import argparse
import math
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from logpipe.analysis.launches import MIN_LAUNCH_LINES, Noise, judge_launches, pool_noise  # noqa: E402
from logpipe.analysis.load import WARMUP_RUNS, load_run  # noqa: E402
from logpipe.db import open_db  # noqa: E402
from logpipe.ingest import ingest_paths  # noqa: E402

ALPHA, THRESHOLD = 0.05, 0.03
NEW_CANDIDATE = False
"""--new-candidate: judge A/A campaigns as if the candidate's configuration had no earlier
launches (a treatment run for the first time): what one disturbed candidate launch costs."""
EFFECTS = (0.05, 0.10, 0.20)
DATA = ROOT / "benchmarks" / "data"
SAMPLES = ("real-cpu", "real-cpu-phases", "real-gpu", "real-gpu-profiled",
           "real-vllm-cpu", "real-engines-cpu")


def groups(db: Path) -> list[tuple[str, dict[str, list[float]]]]:
    """Per configuration (config_key and workload, not profiled, no profiler window), the
    launch values of each family."""
    out = []
    with open_db(str(db), read_only=True) as store:
        rows = store.all(
            # (launches in name order: run ids hash their file's path, so an order by id
            # drew other campaigns from each clone of the repository)
            "SELECT c.config_key, c.workload, list(c.run_id ORDER BY c.name, c.run_id) FROM "
            "run_configs c WHERE c.env_complete AND NOT coalesce(c.profiled, false) AND "
            "c.run_id NOT IN (SELECT run_id FROM run_env WHERE key = 'launch.profile') "
            f"AND c.run_id NOT IN ({WARMUP_RUNS}) GROUP BY 1, 2 "
            "HAVING count(*) >= 2 ORDER BY 1, 2")
        for _key, _, run_ids in rows:
            runs = [load_run(store, r) for r in run_ids]
            strata = [s for r in runs for s, v in r.decode.items() if len(v) >= MIN_LAUNCH_LINES]
            values: dict[str, list[float]] = {"server": [], "client": []}
            if strata:
                stratum = max(set(strata), key=strata.count)
                values["server"] = [float(np.median(r.decode[stratum])) for r in runs
                                    if len(r.decode.get(stratum, ())) >= MIN_LAUNCH_LINES]
            values["client"] = [r.bench.values["output_throughput"] for r in runs
                                if "output_throughput" in r.bench.values]
            out.append((f"{runs[0].name} ({len(runs)} launches)", values))
    return out


def judge(values: np.ndarray, rounds: int, effect: float, borrow: bool,
          rng: np.random.Generator) -> str:
    pick = rng.permutation(len(values))
    a = values[pick[:rounds]]
    b = values[pick[rounds:2 * rounds]] * (1 - effect)
    rest = values[pick[2 * rounds:]]
    # the launches not drawn are the configuration's history in the environment: an A/A
    # candidate is a launch of it too; a scaled candidate stands for a changed
    # configuration, run here for the first time (no history of its own)
    noise: Noise | None = pool_noise({"aa": list(rest)}) if borrow else None
    names = [f"r{i}" for i in range(rounds)]
    candidate = "aa" if effect == 0 and not NEW_CANDIDATE else "new"
    t = judge_launches(names, list(a), names, list(b), higher_is_better=True, paired=True,
                       noise=noise, alpha=ALPHA, threshold=THRESHOLD,
                       configs=("aa", candidate))
    if t.method == "unreplicated":
        return "inconclusive"  # exit 4: never a regression, never an improvement
    return t.verdict


def wilson(k: int, n: int) -> tuple[float, float]:
    if n == 0:
        return (0.0, 1.0)
    z = 1.96
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return max(0.0, centre - half), min(1.0, centre + half)


RECORDINGS = {
    "real-cpu-aa": [DATA / "real-cpu-aa"],
    "real-cpu-aa-busy": [DATA / "real-cpu-aa-busy"],
    "samples": [ROOT / "sample_logs" / name for name in SAMPLES],
}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--draws", type=int, default=2000, help="campaigns drawn per row")
    ap.add_argument("--markdown", action="store_true", help="print a markdown table")
    ap.add_argument("--new-candidate", action="store_true",
                    help="A/A candidates have no earlier launches of their configuration")
    opts = ap.parse_args()
    global NEW_CANDIDATE
    NEW_CANDIDATE = opts.new_candidate
    t0 = time.perf_counter()
    rng = np.random.default_rng(20_261_203)
    header = ["recording", "family", "noise", "rounds", "A/A false positives",
              *[f"power at -{int(e * 100)}%" for e in EFFECTS]]
    rows = []
    described = []
    for recording, paths in RECORDINGS.items():
        db = Path(tempfile.mkdtemp()) / "calibration.duckdb"
        ingest_paths(paths, db)
        configs = groups(db)
        described.append(f"{recording}: " + ", ".join(name for name, _ in configs))
        for family in ("server", "client"):
            for borrow in (False, True):
                for rounds in (1, 2, 3, 4):
                    usable = [np.asarray(v[family], dtype=float) for _, v in configs
                              if len(v[family]) >= 2 * rounds + (2 if borrow else 0)]
                    if not usable:
                        continue
                    cells = []
                    for effect in (0.0, *EFFECTS):
                        hits = 0
                        for i in range(opts.draws):
                            verdict = judge(usable[i % len(usable)], rounds, effect, borrow,
                                            rng)
                            hits += (verdict in ("regression", "improvement") if effect == 0
                                     else verdict == "regression")
                        lo, hi = wilson(hits, opts.draws)
                        cells.append(f"{hits / opts.draws:.1%} [{lo:.1%}–{hi:.1%}]")
                    rows.append([recording, family, "borrowed" if borrow else "own rounds",
                                 str(rounds), *cells])
    if opts.markdown:
        print("| " + " | ".join(header) + " |")
        print("|" + "---|" * len(header))
        for r in rows:
            print("| " + " | ".join(r) + " |")
    else:
        widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(header)]
        print("  ".join(h.ljust(w) for h, w in zip(header, widths, strict=True)))
        for r in rows:
            print("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)))
    print(f"\n{opts.draws} campaigns per row; α = {ALPHA}, δ = {THRESHOLD:.0%}; "
          + "; ".join(described) + f"; {time.perf_counter() - t0:.1f} s")


if __name__ == "__main__":
    main()
