"""Pairing and verdicts the way a careful SGLang engineer would judge them.

Logs are composed with the sample generator's startup sections (server_args, NCCL INFO,
SGLang's own "reset to" warnings, capacity line, ready line) for a 0.5.12 server; each
test varies what its case is about.
"""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from logpipe.cli import app
from logpipe.ingest import ingest_paths
from tests.conftest import load_generator, query

runner = CliRunner()
g = load_generator()
MODEL = "Qwen/Qwen3-8B"
SPEC_BS = [1, 2, 3, 4, 5, 6, 7, 8, 10, 12, 14, 16, 24, 32, 40, 48]
BASE_BS = [1, 2, 4, 8, 12, 16, 24, 32, 40, 48, 56, 64, 72, 80, 88, 96, 104, 112, 120, 128,
           136, 144, 152, 160]


def write_run(root: Path, name: str, *, spec: bool = False, tps: float = 80.0,
              concurrency: int = 1, args: dict[str, Any] | None = None,
              flags: list[str] | None = None, manifest: bool = True,
              nccl: dict[str, str] | None = None, warmup_lines: int = 0,
              seed: int = 1, requests: int = 6, steps: int = 2) -> Path:
    """A run folder: ``server.log`` and, with ``manifest``, the ``env.json`` that
    ``logpipe env capture -- CMD`` would have written (launch command with ``flags``)."""
    folder = root / name
    folder.mkdir(parents=True)
    log = g.Log(g.MISSION_ERA, datetime(2026, 5, 4, 9, 0, seed), g.random.Random(seed))
    over: dict[str, Any] = {"cuda_graph_bs": BASE_BS}
    if spec:
        over.update(speculative_algorithm="EAGLE3", speculative_draft_model_path="draft/e3",
                    speculative_num_steps=steps, speculative_eagle_topk=1,
                    speculative_num_draft_tokens=steps + 1, max_running_requests=48,
                    cuda_graph_bs=SPEC_BS)
        log.raw("Max running requests is reset to 48 for speculative decoding. You can "
                "override this by explicitly setting --max-running-requests.")
    over.update(args or {})
    for var, value in (nccl or {}).items():
        log.raw(f"node-1:8811:8811 [0] NCCL INFO {var} set by environment to {value}")
    g.startup(log, g.base_args(MODEL, **over), "Qwen3ForCausalLM", tp=2 if nccl else 1,
              spec=spec)
    for _ in range(warmup_lines):  # a long warm-up: decode lines still off the graph
        log.tick(0.5)
        log.decode(running=1, tokens=100, usage=0.0, gen=tps * 0.3, graph=False)
    g.workload(log, requests=requests, lines_per_req=10, tps=tps, noise=1.5,
               accept=(2.1, 0.1) if spec else None, concurrency=concurrency)
    g.shutdown(log)
    (folder / "server.log").write_text("\n".join(log.lines) + "\n")
    if manifest:
        m = g.mission_manifest(tuned=False, spec=False, captured_at="2026-05-04T09:00:00+00:00",
                               model=MODEL)
        command = ["python", "-m", "sglang.launch_server", "--model-path", MODEL, *(flags or [])]
        if spec:
            command += ["--speculative-algorithm", "EAGLE3", "--speculative-draft-model-path",
                        "draft/e3", "--speculative-num-steps", str(steps),
                        "--speculative-eagle-topk", "1", "--speculative-num-draft-tokens",
                        str(steps + 1)]
        m["command"] = " ".join(command)
        m["launch_args"] = {}
        (folder / "env.json").write_text(json.dumps(m))
    return folder


def compare(db: Path, *runs: str, extra: tuple[str, ...] = ()) -> tuple[int, dict[str, Any]]:
    args = ["compare", "--db", str(db), "--format", "json", *extra]
    for r in runs:
        args += ["--run", r]
    result = runner.invoke(app, args)
    assert result.exit_code in (0, 1, 3, 4), result.output
    return result.exit_code, json.loads(result.stdout)["comparisons"][0]


def test_speculation_pairs_with_baseline_whose_derived_settings_differ(tmp_path: Path) -> None:
    """SGLang resets max_running_requests to 48, captures another graph batch-size list and
    sizes memory differently when EAGLE-3 is on: the pair is comparable, the differences
    are shown as derived from the treatment."""
    write_run(tmp_path, "base", tps=62.9)
    write_run(tmp_path, "eagle", spec=True, tps=75.9, args={"mem_fraction_static": 0.85},
              seed=2)
    db = tmp_path / "db.duckdb"
    ingest_paths([tmp_path], db)
    code, c = compare(db, "base", "eagle")
    assert c["environment"]["status"] == "comparable", c["notes"]
    assert code == 0 and c["verdict"] == "improvement"
    notes = " ".join(c["notes"])
    for key in ("max_running_requests", "cuda_graph_bs", "mem_fraction_static"):
        assert f"{key} " in notes
    assert notes.count("derived from the treatment") == 3
    assert "SGLang's log says it set it to 48" in notes
    assert c["speculation"]["same_environment"] is True
    # check pairs them as well, and judges the pair by the same rule
    result = runner.invoke(app, ["check", "--db", str(db), "--suite", "pairing",
                                 "--format", "json"])
    assert result.exit_code == 0, result.output


def test_a_derived_setting_the_user_set_is_not_derived(tmp_path: Path) -> None:
    """The user passed --max-running-requests 4 to the speculative run and its load (4
    concurrent requests) reached it, while the baseline ran 2048: refused, key named."""
    write_run(tmp_path, "base", concurrency=4, args={"max_running_requests": 2048},
              flags=["--max-running-requests", "2048"])
    write_run(tmp_path, "eagle", spec=True, concurrency=4, seed=3,
              args={"max_running_requests": 4}, flags=["--max-running-requests", "4"])
    db = tmp_path / "db.duckdb"
    ingest_paths([tmp_path], db)
    code, c = compare(db, "base", "eagle")
    assert code == 3
    notes = " ".join(c["notes"])
    assert "max_running_requests 2048 vs 4: the load reached the lower limit (4) in" in notes
    assert "peaked at 4 running request(s)" in notes


def test_capacity_difference_below_the_load_is_a_caveat(tmp_path: Path) -> None:
    write_run(tmp_path, "a", args={"max_running_requests": 160, "chunked_prefill_size": 8192},
              flags=["--max-running-requests", "160"])
    write_run(tmp_path, "b", args={"max_running_requests": 48, "chunked_prefill_size": 4096},
              flags=["--max-running-requests", "48", "--chunked-prefill-size", "4096"], seed=4)
    db = tmp_path / "db.duckdb"
    ingest_paths([tmp_path], db)
    code, c = compare(db, "a", "b")
    assert code == 0 and c["environment"]["status"] == "comparable"
    notes = " ".join(c["notes"])
    assert "max_running_requests 160 vs 48; both runs stayed below both limits" in notes
    assert "a peaked at 1 running request(s), b peaked at 1 running request(s)" in notes
    assert "chunked_prefill_size 8192 vs 4096; both runs stayed below both limits" in notes


def test_capacity_limit_reached_by_the_load_is_refused(tmp_path: Path) -> None:
    write_run(tmp_path, "a", concurrency=8, args={"max_running_requests": 64},
              flags=["--max-running-requests", "64"])
    write_run(tmp_path, "b", concurrency=8, args={"max_running_requests": 8},
              flags=["--max-running-requests", "8"], seed=5)
    db = tmp_path / "db.duckdb"
    ingest_paths([tmp_path], db)
    code, c = compare(db, "a", "b")
    assert code == 3 and c["metrics"] == []
    assert any("identity differs in arg.max_running_requests" in n for n in c["notes"])
    assert any("the load reached the lower limit (8) in a, b" in n for n in c["notes"])


def test_long_warmup_is_not_a_regression(tmp_path: Path) -> None:
    """Forty decode lines off the graph before the first on the graph: the steady decode
    throughput is identical, so the verdict is no change, whatever coverage says."""
    write_run(tmp_path, "short", tps=80.0)
    write_run(tmp_path, "long", tps=80.0, warmup_lines=40, seed=1)
    db = tmp_path / "db.duckdb"
    ingest_paths([tmp_path], db)
    code, c = compare(db, "short", "long")
    assert code == 0 and c["verdict"] == "same configuration"  # two launches of one config
    decode = next(m for m in c["metrics"] if m["metric"] == "decode throughput")
    assert decode["ratio"] == pytest.approx(1.0, abs=0.01)
    coverage = next(m for m in c["metrics"] if m["metric"] == "graph coverage")
    assert coverage["gates"] is False
    for m in c["metrics"]:
        if m["metric"] not in ("decode throughput", "prefill input throughput"):
            assert m["gates"] is False


def test_a_diagnostic_never_decides(tmp_path: Path) -> None:
    """Run b falls off the graph on every other decode line after warm-up (coverage drops
    from 1 to about 0.5) at the same steady throughput: coverage says lower, the verdict
    stays no change."""
    write_run(tmp_path, "a")
    folder = write_run(tmp_path, "b", seed=1)
    log = folder / "server.log"
    out, k = [], 0
    for line in log.read_text().splitlines():
        if "Decode batch" in line and "cuda graph: True" in line:
            k += 1
            if k % 2 == 0 and k > 2:
                line = line.replace("cuda graph: True", "cuda graph: False")
        out.append(line)
    log.write_text("\n".join(out) + "\n")
    db = tmp_path / "db.duckdb"
    ingest_paths([tmp_path], db)
    code, c = compare(db, "a", "b")
    coverage = next(m for m in c["metrics"] if m["metric"] == "graph coverage")
    assert coverage["verdict"] == "regression" and coverage["gates"] is False
    assert code != 1 and c["verdict"] != "regression"


def test_coverage_is_null_before_the_graph_flag_was_printed(sample_db: Path) -> None:
    rows = query(sample_db, "SELECT r.name, s.graph_coverage FROM run_summary s JOIN runs r "
                            "USING (run_id) WHERE r.name IN ('v0.2.15', 'v0.3.6', 'v0.4.5')")
    assert rows and all(cov is None for _, cov in rows)
    (cov,) = query(sample_db, "SELECT s.graph_coverage FROM run_summary s JOIN runs r "
                              "USING (run_id) WHERE r.name = 'baseline-untuned'")[0]
    assert cov == 1.0  # the first, eager decode line is warm-up, not a coverage gap


def test_nccl_lines_without_manifests_are_diffed_key_by_key(tmp_path: Path) -> None:
    write_run(tmp_path, "ring", manifest=False, nccl={"NCCL_ALGO": "Ring", "NCCL_PROTO": "LL"})
    write_run(tmp_path, "tree", manifest=False, nccl={"NCCL_ALGO": "Tree", "NCCL_PROTO": "LL"},
              seed=6)
    write_run(tmp_path, "ring2", manifest=False, nccl={"NCCL_ALGO": "Ring", "NCCL_PROTO": "LL"},
              seed=7)
    db = tmp_path / "db.duckdb"
    ingest_paths([tmp_path], db)
    diff = runner.invoke(app, ["env", "diff", "--run", "ring", "--run", "tree", "--db",
                               str(db), "--format", "json"])
    assert diff.exit_code in (0, 3), diff.output
    d = json.loads(diff.stdout)
    differing = {i["key"]: (i["a"], i["b"], i["a_source"]) for i in d["differences"]
                 if i["tier"] == "identity"}
    assert differing == {"NCCL_ALGO": ("Ring", "Tree", "log")}
    assert "NCCL_PROTO" in d["known_match"] and "nccl.version" in d["known_match"]
    assert "gpu.model" in d["unknown"]["ring"]
    # known to differ: refused for that key, said to come from the log
    code, c = compare(db, "ring", "tree")
    assert code == 3
    assert any("identity differs in NCCL_ALGO (NCCL_ALGO as the log shows)" in n
               for n in c["notes"])
    # nothing known differs: still unknown, and exactly what is unknown is said
    code, c = compare(db, "ring", "ring2")
    assert code == 3 and c["environment"]["status"] == "unknown"
    note = c["notes"][-1]
    assert "gpu.model, gpu.count, gpu.driver, cuda.version, pkg.sglang, pkg.torch" in note
    assert "NCCL_* from the log's NCCL INFO lines" in note
    assert "Known to match: NCCL_ALGO, NCCL_PROTO" in note


def test_log_and_manifest_disagree_the_log_wins_and_both_are_kept(tmp_path: Path) -> None:
    folder = write_run(tmp_path, "run", nccl={"NCCL_ALGO": "Ring"})
    m = json.loads((folder / "env.json").read_text())
    m["env"]["NCCL_ALGO"] = "Tree"
    (folder / "env.json").write_text(json.dumps(m))
    db = tmp_path / "db.duckdb"
    ingest_paths([tmp_path], db)
    (env,) = query(db, "SELECT env FROM runs")[0]
    entry = json.loads(env)["NCCL_ALGO"]
    assert entry["value"] == "Ring" and entry["source"] == "log"
    assert "says 'Tree'" in entry["conflict"]


def test_one_run_is_paired_with_its_nearest_same_environment_baseline(sample_db: Path
                                                                      ) -> None:
    code, c = compare(sample_db, "eagle3-untuned")
    assert code == 0 and c["reference"]["name"] == "baseline-untuned"
    assert c["notes"][0].startswith("baseline chosen: baseline-untuned, the nearest in time")
    assert round(c["speculation"]["speedup"] * 100, 1) == 20.7
    # the unpaired run: no same-environment baseline, and the near miss says what differs
    code, c = compare(sample_db, "qwen3-30b-eagle3-untuned")
    assert code == 3
    text = " ".join(c["notes"])
    assert "no same-environment baseline for qwen3-30b-eagle3-untuned" in text
    assert "qwen3-30b-baseline-tuned" in text and "NCCL_ALGO" in text


def test_sweep_pairs_speculative_runs_with_a_baseline_whose_derived_settings_differ(
        tmp_path: Path) -> None:
    write_run(tmp_path, "base", tps=62.9)
    write_run(tmp_path, "steps1", spec=True, tps=70.5, steps=1, seed=3)
    write_run(tmp_path, "steps2", spec=True, tps=75.9, steps=2, seed=4)
    db = tmp_path / "db.duckdb"
    ingest_paths([tmp_path], db)
    result = runner.invoke(app, ["sweep", "--by", "speculative_num_steps", "--db", str(db),
                                 "--format", "json"])
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    (group,) = out["groups"]
    assert group["baseline_runs"] == ["base"] and group["baseline_median"] == 62.9
    assert [p["value"] for p in group["points"]] == ["1", "2"] and group["best"] == ["2"]
    assert round(group["points"][1]["speedup"] * 100, 1) == 20.7


def test_nccl_info_lines_without_a_variable_mean_it_is_unset(tmp_path: Path) -> None:
    """With NCCL_DEBUG=INFO, NCCL names every variable it read from the environment.  A
    log that has NCCL INFO lines and no "NCCL_ALGO set by environment" had NCCL_ALGO
    unset: a diff against a log that set it names NCCL_ALGO, not "unknown"."""
    a = write_run(tmp_path, "info-unset", manifest=False)
    b = write_run(tmp_path, "info-ring", manifest=False, nccl={"NCCL_ALGO": "Ring"})
    version = "node-1:8811:8811 [0] NCCL INFO NCCL version 2.21.5+cuda12.4"
    for folder in (a, b):
        log = folder / "server.log"
        lines = log.read_text().splitlines()
        log.write_text("\n".join([version, *lines]) + "\n")
    db = tmp_path / "db.duckdb"
    ingest_paths([tmp_path], db)
    result = runner.invoke(app, ["env", "diff", "--db", str(db), "--run", "info-unset",
                                 "--run", "info-ring"])
    assert "NCCL_ALGO: (unset) → Ring" in result.stdout, result.stdout


def test_capacity_keys_are_judged_by_the_runs_engine_rules() -> None:
    """The keys, their measures and what speculation derives are each engine's rules: a
    vLLM run's ``max_num_seqs`` is judged against its running requests, and SGLang's
    derived-by-speculation rule does not reach a vLLM run."""
    from logpipe.analysis.pairing import Load, Side, judge
    from logpipe.env import DiffItem, Entry, EnvDiff, RunEnv

    def side(name: str, role: str, engine: str, key: str, value: int, running: int) -> Side:
        env = RunEnv({f"arg.{key}": Entry(value, "server_args", "capacity")}, True)
        return Side(name, role, env, Load(running=running), engine=engine)

    def diff(key: str, a: int, b: int) -> EnvDiff:
        return EnvDiff("a", "b", True, True, [DiffItem(f"arg.{key}", "capacity", a, b,
                                                       "server_args", "server_args")])

    below = judge(side("a", "baseline", "vllm", "max_num_seqs", 256, 8),
                  side("b", "speculative", "vllm", "max_num_seqs", 64, 8),
                  diff("max_num_seqs", 256, 64))
    assert [j.status for j in below] == ["below the load"]
    assert "peaked at 8 running request(s)" in below[0].note
    reached = judge(side("a", "baseline", "vllm", "max_num_seqs", 256, 64),
                    side("b", "speculative", "vllm", "max_num_seqs", 64, 64),
                    diff("max_num_seqs", 256, 64))
    assert [(j.status, j.blocks) for j in reached] == [("reached", True)]
    # SGLang derives max_running_requests under speculation; vLLM has no such rule
    sglang = judge(side("a", "baseline", "sglang", "max_running_requests", 128, 4),
                   side("b", "speculative", "sglang", "max_running_requests", 48, 4),
                   diff("max_running_requests", 128, 48))
    assert sglang[0].status == "derived" and "SGLang derives it" in sglang[0].note
    vllm = judge(side("a", "baseline", "vllm", "max_running_requests", 128, 4),
                 side("b", "speculative", "vllm", "max_running_requests", 48, 4),
                 diff("max_running_requests", 128, 48))
    assert vllm[0].status != "derived"


def test_loads_and_run_references_read_together_are_those_read_one_by_one(
        sample_db: Path, tmp_path: Path) -> None:
    """Many runs' loads (the peaks capacity judging reads) in one statement, and many run
    references resolved in one, are what each run's own gives: every run of the samples
    (profiled, windowed and vLLM runs among them), by id, by name and by prefix; an
    unknown or ambiguous reference still fails as alone."""
    import shutil

    from logpipe.analysis.pairing import LOADS_ONE_BY_ONE, load_of, loads_of
    from logpipe.errors import RunNotFoundError
    from logpipe.query import resolve_run, resolve_runs
    from logpipe.store import Store

    db = tmp_path / "samples.duckdb"
    shutil.copy(sample_db, db)
    with Store.open(db) as store:
        runs = store.all("SELECT run_id, name FROM runs ORDER BY run_id")
        ids = [str(r) for r, _ in runs]
        assert len(ids) > LOADS_ONE_BY_ONE
        # (no run of the samples retracted a request)
        store.con.execute("INSERT INTO logpipe_internal.events (run_id, source_id, line_no, "
                          "kind) SELECT ?, source_id, 1, 'retract' FROM sources LIMIT 1",
                          [ids[3]])
        # a server ready after a run's busiest line: the load counts the lines after it
        (busy,) = store.one(  # (run ids follow the checkout's path: found, not indexed)
            "SELECT run_id FROM batches WHERE running_req IS NOT NULL AND run_id IN "
            "(SELECT run_id FROM events WHERE kind = 'ready') "
            "GROUP BY run_id ORDER BY count(*) DESC, run_id LIMIT 1") or (None,)
        store.con.execute(
            "UPDATE logpipe_internal.events SET line_no = (SELECT max(line_no) + 1 "
            "FROM batches WHERE run_id = $1 AND running_req = (SELECT max(running_req) "
            "FROM batches WHERE run_id = $1)) WHERE run_id = $1 AND kind = 'ready'",
            [busy])
        together = loads_of(store, ids)
        assert together == {rid: load_of(store, rid) for rid in ids}
        assert [rid for rid, load in together.items() if load.retracted] == [ids[3]]
        for field in ("running", "queued", "prefill", "kv_tokens", "token_usage"):
            assert sum(getattr(load, field) is not None for load in together.values()) > 20
        refs = [*ids, *(str(n) for _, n in runs), ids[0][:8]]
        assert resolve_runs(store, refs) == [resolve_run(store, r) for r in refs]
        for bad in ("no-such-run", "real-cpu"):
            with pytest.raises(RunNotFoundError):
                resolve_runs(store, [ids[0], bad])


def test_launches_loaded_together_are_each_loaded_alone(sample_db: Path) -> None:
    """A check loads its pairs' launches together (past a few, what each has no
    benchmark, counters or traces of is not asked run by run): each is what loading it
    alone gives, on launches with benchmarks, counter snapshots and traces and on
    launches with none."""
    import dataclasses

    import numpy as np

    from logpipe.analysis.load import load_run, load_runs
    from logpipe.analysis.pairing import LOADS_ONE_BY_ONE
    from logpipe.store import Store

    def plain(x: Any) -> Any:
        if isinstance(x, np.ndarray):
            return x.tolist()
        if dataclasses.is_dataclass(x) and not isinstance(x, type):
            return {f.name: plain(getattr(x, f.name)) for f in dataclasses.fields(x)}
        if isinstance(x, dict):
            return {repr(k): plain(v) for k, v in x.items()}
        if isinstance(x, list | tuple):
            return [plain(v) for v in x]
        return x

    with Store.open(sample_db, read_only=True) as store:
        having = {t: [r for (r,) in store.all(f"SELECT DISTINCT run_id FROM {t} "
                                              "WHERE run_id IS NOT NULL ORDER BY 1")]
                  for t in ("bench_results", "metric_snapshots", "traces")}
        ids = list(dict.fromkeys(r for t in having.values() for r in t[:6]))
        ids += [r for (r,) in store.all("SELECT run_id FROM runs ORDER BY run_id")
                if r not in ids][:LOADS_ONE_BY_ONE + 4 - len(ids)]
        assert len(ids) > LOADS_ONE_BY_ONE and all(having.values())
        together = load_runs(store, ids)
        alone = [load_run(store, r) for r in ids]
    assert [plain(r) for r in together] == [plain(r) for r in alone]
    assert sum(bool(r.steps) for r in together) and sum(bool(r.levels) for r in together)
    assert sum(r.bench.records > 0 for r in together) and sum(bool(r.counters.levels)
                                                       for r in together)


def test_noise_of_many_environments_read_together_is_each_ones_own(sample_db: Path) -> None:
    """The speculation check reads its baselines' environments' launch noise together:
    each environment's is what :func:`noise_for` gives it alone (every environment of the
    samples, several with repeat launches, and one without a fingerprint)."""
    from logpipe.analysis.load import noise_for, noises_for
    from logpipe.store import Store

    with Store.open(sample_db, read_only=True) as store:
        envs = [(fp, model) for fp, model in store.all(
            "SELECT DISTINCT env_fingerprint, model FROM runs ORDER BY ALL")] + [(None, None)]
        together = noises_for(store, envs)
        alone = {e: noise_for(store, *e) for e in envs}
    assert together == alone
    assert sum(bool(n) for n in together.values()) >= 3
