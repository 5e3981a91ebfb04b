"""What logpipe reads from the real vLLM engine: the campaigns in sample_logs/real-vllm-cpu/
(vLLM 0.32.0 on a CPU, baseline against n-gram, 2 rounds ABBA) and
sample_logs/real-engines-cpu/ (SGLang 0.5.23 against vLLM 0.32.0 on one model folder, one
benchmark client, 2 rounds ABBA), both recorded by `logpipe ab` on this machine kind."""

from __future__ import annotations

from pathlib import Path

import pytest

from logpipe.analysis.compare import compare_campaign
from logpipe.ingest import ingest_paths
from tests.conftest import SAMPLES, query

VLLM = SAMPLES / "real-vllm-cpu"
ENGINES = SAMPLES / "real-engines-cpu"


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("realvllm") / "real.duckdb"
    result = ingest_paths([VLLM, ENGINES], path)
    assert not result.failed and result.rows("rejects") == 0
    assert [f.path for f in result.files if f.unread] == []
    return path


def test_the_runs_say_what_they_ran(db: Path) -> None:
    rows = query(db, "SELECT name, engine, role, spec_algorithm, spec_num_draft_tokens, "
                     "engine_version, env_complete, format_era FROM runs "
                     "WHERE name LIKE 'real-vllm-cpu-%' ORDER BY name")
    assert rows == [
        ("real-vllm-cpu-baseline-r1", "vllm", "baseline", None, None, "0.32.0", True,
         "vllm 0.32.0"),
        ("real-vllm-cpu-baseline-r2", "vllm", "baseline", None, None, "0.32.0", True,
         "vllm 0.32.0"),
        ("real-vllm-cpu-ngram-r1", "vllm", "speculative", "ngram", 4, "0.32.0", True,
         "vllm 0.32.0"),
        ("real-vllm-cpu-ngram-r2", "vllm", "speculative", "ngram", 4, "0.32.0", True,
         "vllm 0.32.0")]
    assert query(db, "SELECT DISTINCT value, tier FROM run_env WHERE key = 'pkg.vllm-cpu'") \
        == [("0.32.0", "identity")]
    assert query(db, "SELECT DISTINCT value FROM run_env e JOIN runs r USING (run_id) WHERE "
                     "key = 'effective.kv_cache_tokens' AND r.name LIKE 'real-vllm%'") == [
        ("4096",)]


def test_the_stats_windows_and_their_steady_state(db: Path) -> None:
    rows = query(db, "SELECT r.name, s.steady_decode_lines, s.steady_gen_throughput, "
                     "s.steady_stratum FROM run_summary s JOIN runs r USING (run_id) "
                     "WHERE r.name LIKE 'real-vllm-cpu-%' ORDER BY 1")
    assert rows == [("real-vllm-cpu-baseline-r1", 13, 1552.8, 4),
                    ("real-vllm-cpu-baseline-r2", 18, 1147.75, 4),
                    ("real-vllm-cpu-ngram-r1", 20, 1016.55, 4),
                    ("real-vllm-cpu-ngram-r2", 14, 1263.55, 4)]
    # busy windows whose snapshot says 0 running (requests of ~0.1 s under a 1 s window)
    # are busy, not idle: the load level of the stretch is the peak, 4
    snapshot = query(db, "SELECT count(*) FROM server_samples s JOIN runs r USING (run_id) "
                         "WHERE r.name = 'real-vllm-cpu-baseline-r1' AND running = 0 AND "
                         "gen_tps > 1000")
    assert snapshot == [(2,)]
    assert query(db, "SELECT DISTINCT running_req, state = 'idle' FROM batch_states b JOIN "
                     "runs r USING (run_id) WHERE r.name = 'real-vllm-cpu-baseline-r1'") == [
        (4, False)]


def test_the_spec_lines_follow_their_windows(db: Path) -> None:
    rows = query(db, "SELECT r.name, count(*), sum(accepted_tokens), sum(drafted_tokens), "
                     "min(form), count(stats_line_no) FROM vllm_spec_metrics "
                     "JOIN runs r USING (run_id) GROUP BY 1 ORDER BY 1")
    assert rows == [("real-vllm-cpu-ngram-r1", 22, 6237, 10389, "v1-0.11", 22),
                    ("real-vllm-cpu-ngram-r2", 16, 6277, 10456, "v1-0.11", 16)]
    assert query(db, "SELECT r.name, s.steady_accept_len FROM run_summary s JOIN runs r "
                     "USING (run_id) WHERE r.role = 'speculative' ORDER BY 1") == [
        ("real-vllm-cpu-ngram-r1", 3.115), ("real-vllm-cpu-ngram-r2", 3.075)]


def test_the_benchmarks_are_vllms_and_linked(db: Path) -> None:
    rows = query(db, "SELECT r.name, b.tool, round(b.output_throughput, 2) FROM bench_results b "
                     "JOIN runs r USING (run_id) ORDER BY 1")
    assert rows == [
        ("real-engines-cpu-sglang-r1", "vllm bench serve", 470.35),
        ("real-engines-cpu-sglang-r2", "vllm bench serve", 573.33),
        ("real-engines-cpu-vllm-r1", "vllm bench serve", 989.14),
        ("real-engines-cpu-vllm-r2", "vllm bench serve", 1026.21),
        ("real-vllm-cpu-baseline-r1", "vllm bench serve", 1409.99),
        ("real-vllm-cpu-baseline-r2", "vllm bench serve", 1082.31),
        ("real-vllm-cpu-ngram-r1", "vllm bench serve", 881.34),
        ("real-vllm-cpu-ngram-r2", "vllm bench serve", 1207.9)]


def test_ngram_on_vllm_is_judged_launch_by_launch(db: Path) -> None:
    (c,) = compare_campaign(str(db), "real-vllm-cpu")
    assert c.env_status == "comparable"
    (m,) = [m for m in c.metrics if m.name == "decode throughput"]
    assert m.stratum == 4 and m.launch is not None and m.launch.method == "paired rounds"
    assert [round(r, 3) for r in m.launch.round_ratios] == [0.655, 1.101]
    # two rounds that disagree: no verdict either way, and the note says more rounds
    assert c.verdict == "no significant change" and c.exit_code == 0
    assert any("the two rounds disagree" in n for n in c.notes)
    assert c.speculation is not None and c.speculation["accept_len"] == pytest.approx(3.105)


def test_the_baseline_pair_is_an_aa_pair(db: Path) -> None:
    from logpipe.analysis.compare import compare

    (c,) = compare(str(db), ["real-vllm-cpu-baseline-r1", "real-vllm-cpu-baseline-r2"])
    assert c.verdict == "same configuration" and c.exit_code == 0


def test_sglang_against_vllm_is_judged_on_the_benchmark(db: Path) -> None:
    (c,) = compare_campaign(str(db), "real-engines-cpu")
    assert c.env_status == "comparable", c.notes
    out = {m.name: m for m in c.metrics if m.gates}
    assert {"output throughput", "median TTFT", "median TPOT", "p99 TTFT",
            "median ITL"} <= set(out)
    tput = out["output throughput"].launch
    assert tput is not None and [round(r, 3) for r in tput.round_ratios] == [2.103, 1.79]
    # both rounds say vLLM is about twice as fast here, but two rounds give a t interval
    # with one degree of freedom: not significant, and said so
    assert c.verdict == "no significant change"
    assert tput.ci_low is not None and tput.ci_low < 1 < tput.ci_high
    assert any("the treatment is the engine (sglang 0.5.23 vs vllm 0.32.0)" in n
               for n in c.notes)
    # what the engines set themselves (SGLang's CUDA_DEVICE_MAX_CONNECTIONS) and their
    # arguments and packages are not environment differences
    assert c.env_diff is not None and c.env_diff.identity == []
