"""sample_logs/real-gpu-phases: a real H200 campaign (SGLang 0.5.23, CUDA graphs), baseline
against NGRAM with logpipe's phase hook and a profile in each arm's first launch."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from logpipe.ingest import ingest_paths
from tests.conftest import SAMPLES, query

FOLDER = SAMPLES / "real-gpu-phases"
SPEC = "real-gpu-phases-ngram-r1,real-gpu-phases-ngram-r2"
BASE = "real-gpu-phases-baseline-r1,real-gpu-phases-baseline-r2"


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("gpu-phases") / "g.duckdb"
    assert not ingest_paths([FOLDER], path).failed
    return path


def test_every_launch_timed_its_phases_with_cuda_events_and_profiled_at_batch_32(db: Path
                                                                                 ) -> None:
    clocks = query(db, "SELECT DISTINCT extra->>'clock' FROM phase_timings")
    assert clocks == [("cuda_events",)]
    kinds = dict(query(db, "SELECT r.name, list(DISTINCT p.extra->>'kind') FROM runs r "
                           "JOIN phase_timings p USING (run_id) GROUP BY 1"))
    assert kinds["real-gpu-phases-ngram-r1"] == ["cycle"]
    assert kinds["real-gpu-phases-baseline-r2"] == ["step"]
    profiles = {name: json.loads(v) for name, v in query(
        db, "SELECT r.name, e.value FROM run_env e JOIN runs r USING (run_id) "
            "WHERE e.key = 'launch.profile'")}
    assert set(profiles) == {"real-gpu-phases-baseline-r1", "real-gpu-phases-ngram-r1"}
    assert all(p["batch_size"] == 32 == p["target_batch"] and p["status"] == "done"
               for p in profiles.values())


def test_explain_accounts_for_the_observed_speedup(db: Path) -> None:
    from logpipe.analysis.explain import explain_runs

    ex = explain_runs(str(db), [SPEC, BASE])
    assert ex.stratum == 32 and ex.method == "phase dump"
    assert ex.implied_speedup == pytest.approx(0.269, abs=0.002)
    assert ex.observed_speedup == pytest.approx(0.352, abs=0.002)
    assert ex.agreement.startswith("the phases explain the observed speedup (log gap -6.4%")
    assert "2 A/A pair(s)" in ex.agreement  # the noise compare uses, stated the same way
    cost = next(n for n in ex.notes if n.startswith("the phase hook's own cost"))
    assert "timed by cuda_events" in cost


def test_the_campaign_names_the_cold_launch_and_the_profiler_windows(db: Path) -> None:
    from logpipe.analysis.compare import compare_campaign

    (c,) = compare_campaign(str(db), "real-gpu-phases")
    assert c.arms == {"real-gpu-phases-baseline": ["real-gpu-phases-baseline-r1",
                                                   "real-gpu-phases-baseline-r2"],
                      "real-gpu-phases-ngram": ["real-gpu-phases-ngram-r1",
                                                "real-gpu-phases-ngram-r2"]}
    assert c.verdict == "no significant change" and c.exit_code == 0
    assert c.primary == "decode_throughput"  # the profiled launches' client values left out
    assert c.disagreement is not None
    assert "a profiler window inside the bench of real-gpu-phases-baseline-r1" in c.disagreement
    assert "a cold launch: real-gpu-phases-ngram-r1 (mean TTFT 334 ms" in c.disagreement
    assert "arg.speculative_algorithm: unset → NGRAM" in c.treatment
