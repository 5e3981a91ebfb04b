"""`logpipe launch` and `logpipe ab` end to end, on a stand-in server run as a real
subprocess on 127.0.0.1 (tests/standin_server.py), never a mock of subprocess.

The opt-in test at the end runs `logpipe ab` against the real SGLang CPU server when
``LOGPIPE_REAL_SGLANG`` names the folder its recipe built.
"""

from __future__ import annotations

import json
import os
import shlex
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from logpipe.cli import app
from logpipe.errors import InputError
from logpipe.experiment.launch import LaunchOptions, launch
from logpipe.experiment.plan import Arm, Plan, check_plan, load_plan, schedule_text, split_env
from logpipe.experiment.run import run_plan
from logpipe.experiment.supervise import port_in_use
from logpipe.ingest import ingest_paths
from logpipe.report import plan_text
from tests.conftest import ROOT, SAMPLES, query

runner = CliRunner()
SERVER = ROOT / "tests" / "standin_server.py"
BENCH = ROOT / "tests" / "standin_bench.py"
FAST_STOP = (3.0, 2.0)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def server(port: int, *extra: str) -> list[str]:
    return [sys.executable, str(SERVER), "--port", str(port), *extra]


def bench(*extra: str) -> str:
    return shlex.join([sys.executable, str(BENCH), "--port", "{port}", "--num-prompts", "5",
                       "--output-tokens", "12", "--output-file", "{out}/bench.jsonl", *extra])


def wait_until_ready(log: Path, seconds: float = 60) -> None:
    """Wait (bounded) until the server log a launch writes shows the ready line."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if log.exists() and "ready to roll" in log.read_text():
            return
        time.sleep(0.2)
    pytest.fail(f"the stand-in never became ready ({log})")


def no_children_left(marker: str, besides: int | None = None) -> bool:
    """No process on this machine but `besides` has `marker` in its command line. Read from
    /proc, not `ps`: ps cuts command lines at $COLUMNS, which hid a long server command."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) in (os.getpid(), besides):
            continue
        try:
            args = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue  # gone meanwhile, or not ours to read
        if marker in args:
            return False
    return True


def test_launch_captures_runs_benchmarks_stops_and_ingests(tmp_path: Path) -> None:
    port = free_port()
    db = tmp_path / "db.duckdb"
    lines: list[str] = []
    res = launch(server(port), LaunchOptions(
        name="first", out=tmp_path / "runs" / "first", bench=bench(), db=db,
        ready_timeout=60, stop_waits=FAST_STOP, echo=lines.append))
    assert res.status == "ok" and res.exit_code == 0, res.message
    assert res.bench_exit == 0 and res.server_exit is not None
    folder = tmp_path / "runs" / "first"
    manifest = json.loads((folder / "env.json").read_text())
    assert manifest["command"].endswith(f"--port {port}")
    assert manifest["packages_of"] == sys.executable
    assert manifest["launch"]["status"] == "ok" and manifest["launch"]["name"] == "first"
    info = json.loads((folder / "server_info.json").read_text())
    assert info["version"] == "0.5.23"
    assert (folder / "bench.jsonl").exists() and (folder / "bench_console.txt").exists()
    assert any("fired up and ready to roll" in ln for ln in lines)
    # the run is in the database, named after its folder, environment complete, bench linked
    assert query(db, "SELECT name, env_complete FROM runs") == [("first", True)]
    assert query(db, "SELECT count(*) FROM bench_results b JOIN runs r USING (run_id) "
                     "WHERE r.name = 'first'") == [(1,)]
    # graphs are off for the whole run (CPU): its decode lines are its steady state
    assert res.steady_tps is not None and 600 < res.steady_tps < 800
    assert no_children_left(f"--port {port}")


def test_launch_cli_prints_the_run_and_its_throughput(tmp_path: Path) -> None:
    port = free_port()
    result = runner.invoke(app, [
        "launch", "--name", "cli-run", "--out", str(tmp_path / "cli-run"), "--bench",
        bench(), "--db", str(tmp_path / "db.duckdb"), "--quiet", "--ready-timeout", "60",
        "--", *server(port)])
    assert result.exit_code == 0, result.output
    assert "Run cli-run: ok" in result.stdout
    assert "steady decode throughput" in result.stdout and "tok/s" in result.stdout


def test_server_dying_during_load_is_exit_2_with_its_last_lines(tmp_path: Path) -> None:
    port = free_port()
    result = runner.invoke(app, [
        "launch", "--out", str(tmp_path / "dies"), "--bench", bench(), "--db",
        str(tmp_path / "db.duckdb"), "--quiet", "--", *server(port, "--die-during-load")])
    assert result.exit_code == 2
    assert "Run dies: failed (the server exited before it was ready (exit 1))" in result.stdout
    assert "RuntimeError: stand-in told to die during load" in result.stdout
    # the run is kept, and said to have failed
    env = json.loads((tmp_path / "dies" / "env.json").read_text())
    assert env["launch"]["status"] == "failed"
    assert query(tmp_path / "db.duckdb", "SELECT count(*) FROM runs") == [(1,)]


def test_ready_timeout_stops_the_server_and_keeps_the_log(tmp_path: Path) -> None:
    port = free_port()
    res = launch(server(port, "--hang"), LaunchOptions(
        out=tmp_path / "hangs", bench=bench(), db=tmp_path / "db.duckdb", ready_timeout=3,
        stop_waits=FAST_STOP))
    assert res.status == "timeout" and res.exit_code == 2
    assert "not ready after 3 s" in res.message
    assert "server_args=" in (tmp_path / "hangs" / "server.log").read_text()
    assert no_children_left(f"--port {port}")


def test_a_server_ignoring_sigint_is_stopped_by_sigterm(tmp_path: Path) -> None:
    port = free_port()
    res = launch(server(port, "--ignore-sigint"), LaunchOptions(
        out=tmp_path / "stubborn", bench=bench(), db=tmp_path / "db.duckdb",
        ready_timeout=60, stop_waits=(1.0, 5.0)))
    assert res.status == "ok"
    assert "SIGTERM received" in (tmp_path / "stubborn" / "server.log").read_text()
    assert no_children_left(f"--port {port}")


def test_failing_bench_still_stops_and_ingests(tmp_path: Path) -> None:
    port = free_port()
    res = launch(server(port), LaunchOptions(
        out=tmp_path / "badbench", bench=bench("--fail"), db=tmp_path / "db.duckdb",
        ready_timeout=60, stop_waits=FAST_STOP))
    assert res.status == "bench failed" and res.bench_exit == 3 and res.exit_code == 2
    assert res.run_ids and no_children_left(f"--port {port}")


def test_server_dying_under_the_bench_stops_the_bench(tmp_path: Path) -> None:
    port = free_port()
    res = launch(server(port, "--die-after", "2"), LaunchOptions(
        out=tmp_path / "crash", bench=bench(), db=tmp_path / "db.duckdb", ready_timeout=60,
        stop_waits=FAST_STOP))
    assert res.status == "bench failed" and res.exit_code == 2
    assert "the server exited during the bench (exit 1)" in res.message
    assert any("told to die after 2 requests" in t for t in res.tail)
    assert no_children_left(f"--port {port}")


def test_bench_timeout_stops_a_bench_that_hangs(tmp_path: Path) -> None:
    port = free_port()
    hang = shlex.join([sys.executable, "-c", "import time; time.sleep(120)"])
    res = launch(server(port), LaunchOptions(
        out=tmp_path / "slow", bench=hang, bench_timeout=2, db=tmp_path / "db.duckdb",
        ready_timeout=60, stop_waits=FAST_STOP))
    assert res.status == "bench failed"
    assert "the bench ran past --bench-timeout 2 s" in res.message
    assert no_children_left("time.sleep(120)") and no_children_left(f"--port {port}")


def test_sigterm_to_logpipe_stops_the_children_and_keeps_the_run(tmp_path: Path) -> None:
    """`timeout`, a job scheduler or `kill` ends logpipe with SIGTERM: the server and the
    bench are stopped as on Ctrl-C, and the run is ingested."""
    port = free_port()
    db = tmp_path / "db.duckdb"
    hang = shlex.join([sys.executable, "-c", "import time; time.sleep(120)"])
    proc = subprocess.Popen(
        [sys.executable, "-m", "logpipe.cli", "launch", "--out", str(tmp_path / "termed"),
         "--bench", hang, "--db", str(db), "--quiet", "--", *server(port)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        wait_until_ready(tmp_path / "termed" / "server.log")
        time.sleep(1.0)
        proc.send_signal(signal.SIGTERM)
        try:  # bounded generously: on 2 loaded cores stop + ingest once took over 60 s
            out, _ = proc.communicate(timeout=150)
        except subprocess.TimeoutExpired:
            log = (tmp_path / "termed" / "server.log").read_text()[-2000:]
            pytest.fail(f"logpipe still running 150 s after SIGTERM; server log tail:\n{log}")
    finally:
        if proc.poll() is None:
            proc.kill()
    assert "Run termed: interrupted (stopped by Ctrl-C or SIGTERM)" in out
    assert query(db, "SELECT count(*) FROM runs") == [(1,)]
    assert no_children_left("time.sleep(120)") and no_children_left(f"--port {port}")


def test_kill_9_of_logpipe_still_stops_the_server_and_the_bench(tmp_path: Path) -> None:
    """SIGKILL gives logpipe no chance to stop anything: the watchdog holding its lifeline
    does (on a GPU box a server left behind holds the GPUs)."""
    port = free_port()
    hang = shlex.join([sys.executable, "-c", "import time; time.sleep(121)"])
    proc = subprocess.Popen(
        [sys.executable, "-m", "logpipe.cli", "launch", "--out", str(tmp_path / "killed"),
         "--bench", hang, "--db", str(tmp_path / "db.duckdb"), "--quiet", "--",
         *server(port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_until_ready(tmp_path / "killed" / "server.log")
        deadline = time.monotonic() + 30
        while no_children_left("time.sleep(121)", besides=proc.pid) \
                and time.monotonic() < deadline:
            time.sleep(0.2)  # the bench has started (logpipe's own command line names it)
        assert not no_children_left("time.sleep(121)", besides=proc.pid), "no bench started"
        assert not no_children_left(f"--port {port}", besides=proc.pid), "no server running"
        proc.kill()
        proc.wait(timeout=10)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and not (
                no_children_left(f"--port {port}") and no_children_left("time.sleep(121)")
                and not port_in_use("127.0.0.1", port)):  # an exiting process drops its
            time.sleep(0.2)  # command line a moment before its sockets
    finally:
        if proc.poll() is None:
            proc.kill()
    assert no_children_left(f"--port {port}"), "the server outlived logpipe"
    assert no_children_left("time.sleep(121)"), "the bench outlived logpipe"
    assert not port_in_use("127.0.0.1", port)


def test_port_in_use_is_refused_before_launching(tmp_path: Path) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        result = runner.invoke(app, ["launch", "--out", str(tmp_path / "x"), "--db",
                                     str(tmp_path / "db.duckdb"), "--", *server(port)])
    assert result.exit_code == 2
    assert f"port {port} on 127.0.0.1 is already in use" in result.output
    assert not (tmp_path / "x").exists()


def test_ctrl_c_stops_the_children_and_keeps_what_was_written(tmp_path: Path) -> None:
    """`logpipe launch` without --bench keeps the server up until Ctrl-C (SIGINT to
    logpipe), then stops it and ingests."""
    port = free_port()
    db = tmp_path / "db.duckdb"
    proc = subprocess.Popen(
        [sys.executable, "-m", "logpipe.cli", "launch", "--out", str(tmp_path / "manual"),
         "--db", str(db), "--quiet", "--", *server(port)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        wait_until_ready(tmp_path / "manual" / "server.log")
        subprocess.run([sys.executable, str(BENCH), "--port", str(port), "--num-prompts", "2"],
                       check=True, timeout=60)
        proc.send_signal(signal.SIGINT)
        out, _ = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, out
    assert "Run manual: ok (stopped by Ctrl-C or SIGTERM)" in out
    assert query(db, "SELECT count(*) > 0 FROM batches") == [(True,)]
    assert no_children_left(f"--port {port}")


def plan(tmp_path: Path, port: int, **over: object) -> Plan:
    p = Plan(name="demo", baseline=Arm("baseline", server(port), {"STANDIN_TPS": "700"}),
             candidates=[Arm("ngram", server(port, "--speculative-algorithm", "NGRAM"),
                             {"STANDIN_TPS": "550"})],
             bench=bench(), rounds=2, out=tmp_path / "runs", ready_timeout=60)
    for k, v in over.items():
        setattr(p, k, v)
    return p


def test_a_misspelt_plan_key_is_an_error_with_a_suggestion(tmp_path: Path) -> None:
    srv = shlex.join(server(free_port()))
    body = (f'bench = "b"\n[baseline]\ncommand = {json.dumps(srv)}\n[[candidates]]\n'
            f'command = {json.dumps(srv + " --speculative-algorithm NGRAM")}\n')
    path = tmp_path / "plan.toml"
    path.write_text("round = 3\n" + body)
    with pytest.raises(InputError, match="unknown key 'round' in the plan: did you mean "
                                         "'rounds'"):
        load_plan(path)
    path.write_text(body.replace("[[candidates]]\ncommand", "[[candidates]]\ncomand"))
    with pytest.raises(InputError, match=r"unknown key 'comand' in \[\[candidates\]\] #1: "
                                         "did you mean 'command'"):
        load_plan(path)
    result = runner.invoke(app, ["ab", str(tmp_path / "plan.toml"), "--dry-run"])
    assert result.exit_code == 2 and "did you mean 'command'" in result.output


def test_env_assignments_are_the_environment_not_the_program(tmp_path: Path) -> None:
    """`env VAR=1 python -m ...` and `VAR=1 python -m ...`: the program is python, the
    variable the arm's environment (it used to be refused as another program)."""
    assert split_env(["env", "A=1", "B=x=y", "python", "-m", "s"]) == (
        {"A": "1", "B": "x=y"}, ["python", "-m", "s"])
    assert split_env(["A=1", "python"]) == ({"A": "1"}, ["python"])
    assert split_env(["python", "A=1"]) == ({}, ["python", "A=1"])
    port = free_port()
    srv = shlex.join(server(port))
    path = tmp_path / "plan.toml"
    path.write_text(
        f'bench = "b"\n[baseline]\ncommand = {json.dumps("env STANDIN_TPS=700 " + srv)}\n'
        f'[[candidates]]\nname = "ngram"\n'
        f'command = {json.dumps("STANDIN_TPS=550 " + srv + " --speculative-algorithm NGRAM")}'
        '\n')
    p = load_plan(path)
    assert p.baseline.command == server(port) and p.baseline.env == {"STANDIN_TPS": "700"}
    assert p.candidates[0].env == {"STANDIN_TPS": "550"}
    dry = runner.invoke(app, ["ab", str(path), "--dry-run", "--out", str(tmp_path / "r")])
    assert dry.exit_code == 0, dry.output
    assert "[1] plan-baseline-r1" in dry.stdout and "[4] plan-baseline-r2" in dry.stdout
    assert "env: STANDIN_TPS=550" in dry.stdout and "nothing was launched" in dry.stdout
    assert not (tmp_path / "r").exists()


def test_fail_fast_stops_a_campaign_whose_first_launch_dies(tmp_path: Path) -> None:
    port = free_port()
    db = tmp_path / "db.duckdb"
    dying = plan(tmp_path, port, baseline=Arm("baseline", server(port),
                                              {"STANDIN_DIE_DURING_LOAD": "1"}))
    result = run_plan(dying, db, stop_waits=FAST_STOP)
    assert [res.name for _, _, res in result.launches] == ["demo-baseline-r1"]
    assert result.exit_code == 2
    assert any(n.startswith("stopped after demo-baseline-r1: the first launch of arm "
                            "'baseline' failed") and "3 launch(es) not run" in n
               for n in result.notes)
    going = run_plan(plan(tmp_path, port, baseline=Arm("baseline", server(port),
                                                       {"STANDIN_DIE_DURING_LOAD": "1"}),
                          rounds=1, fail_fast=False, out=tmp_path / "runs2"), db,
                     stop_waits=FAST_STOP)
    assert [res.status for _, _, res in going.launches] == ["failed", "ok"]


def test_allow_env_diff_of_a_plan_is_honoured_in_the_judgement(tmp_path: Path) -> None:
    port = free_port()
    p = plan(tmp_path, port, rounds=1, allow_env_diff=frozenset({"NCCL_ALGO"}),
             baseline=Arm("baseline", server(port), {"STANDIN_TPS": "700",
                                                     "NCCL_ALGO": "Ring"}))
    p.candidates[0].env["NCCL_ALGO"] = "Tree"
    result = run_plan(p, tmp_path / "db.duckdb", stop_waits=FAST_STOP)
    (c,) = result.comparisons
    assert c.env_status == "allowed" and c.allowed_keys == ["NCCL_ALGO"], c.notes
    assert c.verdict != "incomparable"
    # the checks pair as the judgement does: the allowed key is no pairing failure
    pairing = [(name, status) for name, status, _ in result.checks if name.startswith("pairing")]
    assert pairing and all(status == "PASS" for _, status in pairing), result.checks


def test_abba_schedule_and_seeded_random_order() -> None:
    p = Plan(name="p", baseline=Arm("a", ["x"]), candidates=[Arm("b", ["x", "--y", "1"])],
             bench="b", rounds=4)
    assert [(r, a.name) for r, a in p.schedule()] == [
        (1, "a"), (1, "b"), (2, "b"), (2, "a"), (3, "a"), (3, "b"), (4, "b"), (4, "a")]
    p.order, p.seed = "random", 7
    first = [(r, a.name) for r, a in p.schedule()]
    assert first == [(r, a.name) for r, a in p.schedule()]  # seeded: the same every time
    assert sorted(first) == sorted((r, n) for r in range(1, 5) for n in ("a", "b"))


def test_what_the_plan_varies_is_its_declared_treatment() -> None:
    """Arms that differ in identity keys the plan's own commands or env set (a layout, an
    NCCL variable, CUDA graphs off) are the experiment's declared treatment, recorded for
    the judgement; a different program is still refused."""
    p = Plan(name="p", baseline=Arm("base", ["python", "-m", "sglang.launch_server",
                                             "--tp", "2"]),
             candidates=[Arm("spec", ["python", "-m", "sglang.launch_server", "--tp", "4",
                                      "--speculative-algorithm", "EAGLE3",
                                      "--disable-cuda-graph"],
                             env={"NCCL_ALGO": "Ring"})], bench="b")
    check_plan(p)
    assert p.declared == {"NCCL_ALGO", "arg.tp_size", "arg.disable_cuda_graph"}
    p.baseline = Arm("base", ["python", "server_a.py", "--tp", "2"])
    p.candidates[0] = Arm("spec", ["python", "server_b.py", "--tp", "2"])
    with pytest.raises(InputError, match="command.program"):
        check_plan(p)


def test_example_plan_in_sample_logs_loads() -> None:
    p = load_plan(SAMPLES / "real-cpu" / "plan.toml")
    assert [a.name for a in p.arms] == ["baseline", "ngram"] and p.rounds == 2
    assert p.order == "abba"


def test_plan_sweep_expands_candidates(tmp_path: Path) -> None:
    f = tmp_path / "sweep.toml"
    f.write_text('name = "s"\nbench = "b"\n[baseline]\ncommand = "srv --port 1"\n'
                 '[[candidates]]\nname = "eagle"\n'
                 'command = "srv --port 1 --speculative-algorithm EAGLE3"\n'
                 '[sweep]\nspeculative_num_steps = [1, 2, 3]\n')
    p = load_plan(f)
    assert [a.name for a in p.candidates] == ["eagle-num_steps1", "eagle-num_steps2",
                                             "eagle-num_steps3"]
    assert p.candidates[1].command[-2:] == ["--speculative-num-steps", "2"]


def counted_opens(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every connection made to a database file from now on (opens, and reopens after
    letting a reader in), by path."""
    from logpipe.store import connection

    opened: list[str] = []
    connect = connection.connect

    def counting(path: str, read_only: bool) -> Any:
        opened.append(path)
        return connect(path, read_only)

    monkeypatch.setattr(connection, "connect", counting)
    return opened


def test_ab_runs_a_plan_end_to_end(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    port = free_port()
    db = tmp_path / "db.duckdb"
    with pytest.raises(InputError, match="command.program"):  # checked before anything starts
        run_plan(plan(tmp_path, port, candidates=[Arm("fast", [sys.executable, "other.py"])]),
                 db, stop_waits=FAST_STOP)
    assert not (tmp_path / "runs").exists()
    # the stand-in's bench times HTTP round trips, not the server's decode rate: the plan
    # declares the server log its deciding metric
    opened = counted_opens(monkeypatch)
    result = run_plan(plan(tmp_path, port, primary="decode_throughput"), db,
                      stop_waits=FAST_STOP)
    # four launches ingested, judged, checked: the database opened once for all of it
    assert opened == [str(db)]
    names = [res.name for _, _, res in result.launches]
    assert names == ["demo-baseline-r1", "demo-ngram-r1", "demo-ngram-r2", "demo-baseline-r2"]
    assert all(res.status == "ok" for _, _, res in result.launches)
    assert sorted(query(db, "SELECT name FROM runs WHERE env_complete")) == sorted(
        (n,) for n in names)
    (c,) = result.comparisons
    assert c.env_status == "comparable", c.notes
    # the stand-in's NGRAM arm runs at 550 tok/s against 700: a real regression, found
    assert c.verdict == "regression" and result.exit_code == 1
    assert c.primary == "decode_throughput" and c.primary_reason == "declared"
    assert c.speculation and c.speculation["baseline_tps"] > c.speculation["spec_tps"]
    assert any("derived from the treatment" in n for n in c.notes)
    assert set(result.rounds) == {"baseline", "ngram"}
    # judged launch by launch: two rounds paired, their ratios printed with the verdict
    lead = next(m for m in c.metrics if m.launch is not None and m.launch.round_ratios)
    assert lead.launch.method == "paired rounds" and len(lead.launch.round_ratios) == 2
    assert c.replication.startswith("2 rounds, paired by recorded round")
    text = plan_text(result)
    assert "round ratios @ " in text and "Launches: 2 rounds, paired" in text
    assert f"arm (steady decode tok/s @ {result.rounds_stratum} running)" in text
    # compare --campaign later gives the same verdict as ab did, from one open
    opened.clear()
    again = runner.invoke(app, ["compare", "--campaign", "demo", "--db", str(db)])
    assert again.exit_code == result.exit_code == 1, again.output
    assert "round ratios @ " in again.stdout
    assert opened == [str(db)]
    opened.clear()
    checked = runner.invoke(app, ["check", "--db", str(db), "--suite", "regressions"])
    assert checked.exit_code == 1 and opened == [str(db)], checked.output
    # so does the report, from one open, with the rounds as ab printed them
    opened.clear()
    from logpipe.report.html import build_report

    build_report(db, tmp_path / "report.html", plan="demo")
    assert opened == [str(db)]
    html = (tmp_path / "report.html").read_text()
    assert f"steady decode tok/s @ {result.rounds_stratum} running" in html
    for arm, by_round in result.rounds.items():
        for value in by_round.values():
            assert value is not None and f"<td>{value:.1f}</td>" in html, (arm, value)
    # the checks ran too, cut to this plan: the pair is found, and its regression flagged
    checks = {name: (status, rows) for name, status, rows in result.checks}
    assert checks["pairing: every speculative run has a same-environment baseline"][0] == \
        "PASS"
    status, rows = checks["regressions: speculation is not slower than its paired baseline"]
    assert status == "FAIL" and {r["spec_run"] for r in rows} == {"demo-ngram"}
    assert all(v is not None for arm in result.rounds.values() for v in arm.values())


def test_ab_plan_with_a_sweep_ends_with_the_sweep(tmp_path: Path) -> None:
    port = free_port()
    plan_file = tmp_path / "sweep.toml"
    srv = shlex.join(server(port))
    plan_file.write_text(
        f'name = "sw"\nrounds = 1\nready_timeout = 60\nbench = {json.dumps(bench())}\n'
        f'[baseline]\ncommand = {json.dumps(srv)}\nenv = {{ STANDIN_TPS = "600" }}\n'
        f'[[candidates]]\nname = "ngram"\n'
        f'command = {json.dumps(srv + " --speculative-algorithm NGRAM")}\n'
        f'env = {{ STANDIN_TPS = "650" }}\n'
        '[sweep]\nspeculative_num_steps = [1, 2]\n')
    p = load_plan(plan_file)
    p.out = tmp_path / "runs"
    result = run_plan(p, tmp_path / "db.duckdb", stop_waits=FAST_STOP)
    assert [res.name for _, _, res in result.launches] == [
        "sw-baseline-r1", "sw-ngram-num_steps1-r1", "sw-ngram-num_steps2-r1"]
    assert len(result.comparisons) == 2
    assert result.sweep is not None and result.sweep.key == "arg.speculative_num_steps"
    (group,) = result.sweep.groups
    assert [pt.value for pt in group.points] == ["1", "2"]


def test_ab_cli_with_flags_json(tmp_path: Path) -> None:
    port = free_port()
    result = runner.invoke(app, [
        "ab", "--baseline", shlex.join(server(port)), "--candidate",
        shlex.join(server(port, "--speculative-algorithm", "NGRAM")), "--bench", bench(),
        "--rounds", "1", "--name", "flags", "--out", str(tmp_path / "runs"), "--db",
        str(tmp_path / "db.duckdb"), "--format", "json", "--ready-timeout", "60"])
    assert result.exit_code in (0, 1, 4), result.output
    out = json.loads(result.stdout)
    assert [r["name"] for r in out["runs"]] == ["flags-baseline-r1", "flags-candidate-r1"]
    assert out["exit_code"] == result.exit_code
    assert out["comparisons"][0]["environment"]["status"] == "comparable"


@pytest.mark.skipif(not os.environ.get("LOGPIPE_REAL_SGLANG"),
                    reason="set LOGPIPE_REAL_SGLANG to the sglang-cpu folder to run")
def test_ab_against_the_real_sglang_cpu_server(tmp_path: Path) -> None:
    """Baseline against NGRAM on the real SGLang 0.5.23 CPU engine, 2 rounds ABBA, with
    the example plan of sample_logs/real-cpu/ (several minutes)."""
    os.environ["SGLANG_CPU"] = os.environ["LOGPIPE_REAL_SGLANG"]
    p = load_plan(SAMPLES / "real-cpu" / "plan.toml")
    p.out = tmp_path / "runs"
    db = tmp_path / "db.duckdb"
    result = run_plan(p, db)
    assert [res.status for _, _, res in result.launches] == ["ok"] * 4
    (c,) = result.comparisons
    assert c.env_status == "comparable", c.notes
    assert c.verdict in ("regression", "improvement", "no significant change")
    assert query(db, "SELECT count(*) FROM runs WHERE env_complete") == [(4,)]


@pytest.mark.skipif(not os.environ.get("LOGPIPE_REAL_SGLANG"),
                    reason="set LOGPIPE_REAL_SGLANG to the sglang-cpu folder to run")
def test_ab_with_phases_against_the_real_sglang_cpu_server(tmp_path: Path) -> None:
    """`phases = true` on the real CPU engine: every NGRAM launch logs its cycles' phases,
    every baseline launch its decode steps, at a measured hook cost under 1% of a cycle,
    and `explain` reproduces the observed speedup from the phases."""
    from logpipe.analysis.explain import explain_runs, explain_text

    os.environ["SGLANG_CPU"] = os.environ["LOGPIPE_REAL_SGLANG"]
    p = load_plan(SAMPLES / "real-cpu-phases" / "plan.toml")
    p.out = tmp_path / "runs"
    db = tmp_path / "db.duckdb"
    result = run_plan(p, db)
    assert [res.status for _, _, res in result.launches] == ["ok"] * 4
    kinds = dict(query(db, "SELECT r.name, list(DISTINCT p.extra->>'kind') FROM runs r "
                           "JOIN phase_timings p USING (run_id) GROUP BY 1"))
    assert {k: sorted(v) for k, v in kinds.items()} == {
        "real-cpu-phases-baseline-r1": ["step"], "real-cpu-phases-baseline-r2": ["step"],
        "real-cpu-phases-ngram-r1": ["cycle"], "real-cpu-phases-ngram-r2": ["cycle"]}
    (overhead,) = query(db, "SELECT sum(h) / sum(c) FROM (SELECT any_value(cycle_ms) AS c, "
                            "any_value((extra->>'hook_ms')::DOUBLE) AS h FROM phase_timings "
                            "GROUP BY source_path, line_no)")[0]
    assert overhead < 0.01
    ex = explain_runs(str(db), ["real-cpu-phases-ngram-r1,real-cpu-phases-ngram-r2",
                                "real-cpu-phases-baseline-r1,real-cpu-phases-baseline-r2"])
    print(explain_text(ex))  # (shown with -s, and on a failure)
    assert ex.method == "phase dump" and ex.implied_speedup is not None
    # each arm's whole iteration measured by the hook, no scheduler time assumed
    assert ex.sources["cycle_ms"].startswith("geometric mean over 2 launch(es)"), ex.sources
    assert ex.sources["base_step_ms"].startswith("geometric mean over 2 launch(es)")
    assert not ex.agreement.startswith("unexplained"), ex.agreement


@pytest.mark.skipif(not os.environ.get("LOGPIPE_REAL_SGLANG"),
                    reason="set LOGPIPE_REAL_SGLANG to the sglang-cpu folder to run")
def test_launch_profile_5_against_the_real_sglang_cpu_server(tmp_path: Path) -> None:
    """`launch --profile 5` on the real CPU engine (as sample_logs/real-cpu-profiled): a
    linked trace, a bounded profiled window, steady lines outside it, and a compare against
    an unprofiled launch that uses them."""
    from logpipe.analysis.compare import compare

    cpu = Path(os.environ["LOGPIPE_REAL_SGLANG"])
    py = str(cpu / "venv" / "bin" / "python")
    bench_cmd = shlex.join([
        py, "-m", "sglang.bench_serving", "--backend", "sglang", "--host", "127.0.0.1",
        "--port", "{port}", "--dataset-name", "random-ids", "--random-input-len", "64",
        "--random-output-len", "32", "--num-prompts", "48", "--max-concurrency", "4",
        "--seed", "1", "--tokenizer", str(cpu / "tinymodel"),
        "--output-file", "{out}/bench_serving.jsonl"])
    port = free_port()
    server_cmd = [py, "-m", "sglang.launch_server", "--model-path", str(cpu / "tinymodel"),
                  "--device", "cpu", "--host", "127.0.0.1", "--port", str(port),
                  "--attention-backend", "torch_native", "--max-total-tokens", "8192",
                  "--decode-log-interval", "1"]
    db = tmp_path / "db.duckdb"
    for name, steps in (("p5", 5), ("plain", None)):
        res = launch(server_cmd, LaunchOptions(
            name=name, out=tmp_path / name, bench=bench_cmd, db=db, ready_timeout=400,
            profile_steps=steps, env={"SGLANG_USE_CPU_ENGINE": "1"}))
        assert res.status == "ok", (res.message, res.tail)
    assert query(db, "SELECT r.name, t.link_method FROM traces t JOIN runs r USING (run_id)") \
        == [("p5", "profile id")]
    rows = dict(query(db, "SELECT r.name, count(*) FILTER (state = 'profiled') FROM runs r "
                          "JOIN batch_states b USING (run_id) GROUP BY 1"))
    assert 0 < rows["p5"] <= 10 and rows["plain"] == 0
    assert query(db, "SELECT count(*) FROM runs WHERE profiled") == [(0,)]
    # the profiler waited for the bench's concurrency: the batch it profiled is said
    ((manifest,),) = query(db, "SELECT e.value FROM run_env e JOIN runs r USING (run_id) "
                               "WHERE r.name = 'p5' AND e.key = 'launch.profile'")
    record = json.loads(manifest)
    assert record["target_batch"] == 4 and record["batch_size"] == 4, record
    (c,) = compare(str(db), ["p5", "plain"])
    assert c.exit_code == 0 and c.verdict == "same configuration", c.notes


_BLOCKED = """
import sys
class Block:
    def find_spec(self, name, path=None, target=None):
        if name.split('.')[0] in {'duckdb', 'polars', 'numpy', 'scipy', 'pyarrow', 'plotly',
                                  'great_expectations', 'packaging'}:
            raise ImportError('not on this GPU machine: ' + name)
        return None
sys.meta_path.insert(0, Block())
sys.argv = ['logpipe'] + sys.argv[1:]
from logpipe.cli import main
main()
"""


def test_record_only_on_a_bare_machine_then_judge_elsewhere(tmp_path: Path) -> None:
    """`ab --record-only` needs only the standard library and typer (a GPU box without
    duckdb, polars, numpy...); its run folders, ingested and judged later with `compare
    --campaign`, give what a full `ab` gives."""
    port = free_port()
    srv = shlex.join(server(port))
    plan_file = tmp_path / "demo.toml"
    plan_file.write_text(
        f'name = "demo"\nrounds = 1\nready_timeout = 60\nbench = {json.dumps(bench())}\n'
        'primary = "decode_throughput"\n'
        f'[baseline]\ncommand = {json.dumps(srv)}\nenv = {{ STANDIN_TPS = "700" }}\n'
        f'[[candidates]]\nname = "ngram"\n'
        f'command = {json.dumps(srv + " --speculative-algorithm NGRAM --disable-cuda-graph")}'
        '\nenv = { STANDIN_TPS = "550" }\n')
    recorded = tmp_path / "recorded"
    proc = subprocess.run([sys.executable, "-c", _BLOCKED, "ab", str(plan_file),
                           "--record-only", "--out", str(recorded), "--quiet",
                           "--db", str(tmp_path / "never.duckdb")],
                          cwd=ROOT, capture_output=True, text=True, timeout=300,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "recorded only: ingest" in proc.stdout
    assert not (tmp_path / "never.duckdb").exists()
    assert sorted(p.name for p in recorded.iterdir()) == ["demo-baseline-r1", "demo-ngram-r1"]
    db = tmp_path / "later.duckdb"
    assert not ingest_paths([recorded], db).failed
    later = runner.invoke(app, ["compare", "--campaign", "demo", "--db", str(db),
                                "--format", "json"])
    again = load_plan(plan_file)
    again.out = tmp_path / "full"
    full = run_plan(again, tmp_path / "full.duckdb", stop_waits=FAST_STOP)
    (c,) = full.comparisons
    judged = json.loads(later.stdout)["comparisons"][0]
    # one round, no launch noise measured: the same unreplicated regression both ways (exit
    # 4), judged with the plan's recorded options (its deciding metric, and the CUDA-graph
    # switch its own command sets: no allow_env_diff needed)
    assert later.exit_code == full.exit_code == 4
    assert judged["verdict"] == c.verdict == "unreplicated regression"
    assert judged["deciding_metric"]["metric"] == c.primary == "decode_throughput"
    assert any("cuda_graph" in t for t in judged["treatment"]), judged["treatment"]
    assert judged["environment"]["status"] != "incomparable"
    assert judged["arms"] == {"demo-baseline": ["demo-baseline-r1"],
                              "demo-ngram": ["demo-ngram-r1"]}
    assert judged["environment"]["status"] == c.env_status == "comparable"
    ratio = next(m for m in judged["metrics"] if m["metric"] == "decode throughput")["ratio"]
    assert ratio == pytest.approx(550 / 700, rel=0.05)


def test_launch_profile_takes_a_bounded_window_of_busy_steps(tmp_path: Path) -> None:
    """--profile STEPS: /start_profile with num_steps once the bench has the server
    decoding; the trace lands in the run folder, links by profile id, and only the
    window's lines are profiled (the launch stays usable as a baseline)."""
    port = free_port()
    db = tmp_path / "db.duckdb"
    res = launch(server(port), LaunchOptions(
        out=tmp_path / "prof", bench=bench(), db=db, ready_timeout=60, stop_waits=FAST_STOP,
        profile_steps=4))
    assert res.status == "ok", res.message
    profile = json.loads((tmp_path / "prof" / "env.json").read_text())["launch"]["profile"]
    assert profile["status"] == "done" and profile["steps"] == 4
    assert profile["with_stack"] is False  # Python stacks would swamp a GPU trace
    assert profile["activities"] == ["CPU"] or Path("/dev/nvidia0").exists()
    [trace] = profile["traces"]
    assert (tmp_path / "prof" / trace).is_file()
    log = (tmp_path / "prof" / "server.log").read_text().splitlines()
    start = next(i for i, line in enumerate(log) if "Profiling starts" in line)
    assert sum("Decode batch" in line for line in log[:start]) >= 1  # decoding, not warm-up
    assert query(db, "SELECT r.profiled, t.link_method FROM traces t JOIN runs r "
                     "USING (run_id)") == [(False, "profile id")]
    assert query(db, "SELECT count(*) FILTER (category = 'python_function'), "
                     "count(*) FROM trace_ops") == [(0, 1)]
    stop = next(i for i, line in enumerate(log) if "Stop profiling" in line)
    inside = sum("batch" in line for line in log[start:stop])
    assert inside >= 4  # the 4 steps (the stand-in's other requests may print between)
    assert query(db, "SELECT count(*) FROM batch_states WHERE state = 'profiled'") == [
        (inside,)]
    assert query(db, "SELECT steady_decode_lines > 0 FROM run_summary") == [(True,)]


def test_launch_profile_not_taken_when_the_bench_never_decodes(tmp_path: Path) -> None:
    port = free_port()
    quick = shlex.join([sys.executable, "-c", "pass"])
    res = launch(server(port), LaunchOptions(
        out=tmp_path / "noprof", bench=quick, db=tmp_path / "db.duckdb", ready_timeout=60,
        stop_waits=FAST_STOP, profile_steps=4))
    assert res.status == "ok"
    profile = json.loads((tmp_path / "noprof" / "env.json").read_text())["launch"]["profile"]
    assert profile["status"] == "not taken"
    assert profile["message"] == "the bench ended before the server was decoding"
    assert not (tmp_path / "noprof" / "profile").exists()


def test_a_warm_up_launch_by_default_where_caches_are_cold() -> None:
    """An unjudged launch of each arm before round 1: on by default when the plan
    profiles or an engine compiles kernels at first use on a GPU; off on a CPU engine or
    when the plan says so; the schedule shows it."""
    from logpipe.experiment.plan import schedule_text, warmup_default

    gpu = ["python", "-m", "sglang.launch_server", "--model-path", "m"]
    cpu = [*gpu, "--device", "cpu"]
    p = Plan(name="p", baseline=Arm("base", gpu), candidates=[Arm("c", [*gpu, "--x", "1"])],
             bench="b")
    on, why = warmup_default(p)
    assert on and "sglang compiles kernels at first use" in why
    p.baseline, p.candidates = Arm("base", cpu), [Arm("c", [*cpu, "--x", "1"])]
    assert warmup_default(p) == (False, "")
    p.profile = 5
    assert warmup_default(p) == (True, "default: the plan profiles")
    p.warmup_launch = False
    assert warmup_default(p)[0] is False
    p.warmup_launch = True
    check_plan(p)
    text = schedule_text(p)
    assert "[0] p-warmup-base (not judged" in text and "[0] p-warmup-c (not judged" in text


def test_ab_resume_continues_a_campaign_killed_part_way(tmp_path: Path) -> None:
    """A campaign recorded, then killed during its last launch (its manifest still says
    starting, nothing ingested): a plain re-run refuses and says what is there; --resume
    keeps the complete launches (ingesting them now), moves the partial one aside, runs it
    again and judges the campaign."""
    port = free_port()
    p = plan(tmp_path, port, primary="decode_throughput")
    run_plan(p, tmp_path / "never.duckdb", stop_waits=FAST_STOP, record_only=True)
    last = p.out / "demo-baseline-r2"  # type: ignore[operator]
    manifest = json.loads((last / "env.json").read_text())
    manifest["launch"]["status"] = "starting"  # what a kill -9 leaves
    (last / "env.json").write_text(json.dumps(manifest))
    db = tmp_path / "db.duckdb"
    with pytest.raises(InputError) as exc:
        run_plan(p, db, stop_waits=FAST_STOP)
    said = str(exc.value) + (exc.value.hint or "")
    assert "demo-baseline-r2 (partial: starting, never ingested)" in said
    assert "demo-ngram-r1 (complete, never ingested)" in said and "--resume" in said
    result = run_plan(p, db, stop_waits=FAST_STOP, resume=True)
    assert [res.status for _, _, res in result.launches] == ["ok"] * 4
    assert any(n.startswith("demo-baseline-r2: a partial launch (status starting) moved "
                            "aside to demo-baseline-r2.partial-") for n in result.notes)
    assert sorted(n for (n,) in query(db, "SELECT name FROM runs")) == [
        "demo-baseline-r1", "demo-baseline-r2", "demo-ngram-r1", "demo-ngram-r2"]
    (c,) = result.comparisons
    assert c.verdict == "regression" and result.exit_code == 1


def test_ab_with_load_levels_benches_each_level_and_judges_each(tmp_path: Path) -> None:
    """``levels``: every launch runs the bench once per level (``--max-concurrency``
    set), each record carries its level, and the verdict is given per level, paired by
    round, with a crossover statement."""
    port = free_port()
    db = tmp_path / "db.duckdb"
    p = plan(tmp_path, port, primary="decode_throughput", levels=(1.0, 3.0),
             warmup_launch=False)
    assert "--max-concurrency 1, 3, in that order" in schedule_text(p)
    result = run_plan(p, db, stop_waits=FAST_STOP)
    assert all(res.status == "ok" for _, _, res in result.launches)
    folder = result.launches[0][2].out
    assert sorted(f.name for f in folder.glob("bench_console*")) == [
        "bench_console-max_concurrency-1.txt", "bench_console-max_concurrency-3.txt"]
    levels = query(db, "SELECT r.name, b.max_concurrency FROM bench_results b JOIN runs r "
                       "USING (run_id) ORDER BY 1, 2")
    assert levels == [(name, level) for name in sorted(r.name for _, _, r in result.launches)
                      for level in (1, 3)]
    (c,) = result.comparisons
    assert [r.level.label for r in c.levels] == ["concurrency 1", "concurrency 3"]
    assert all(r.metric == "output_throughput" and r.test.method.startswith("paired rounds")
               and len(r.test.values_a) == 2 for r in c.levels)
    assert c.crossover
    text = plan_text(result)
    assert "By load level (client output throughput" in text and "Crossover: " in text
    as_json = json.loads(runner.invoke(app, ["compare", "--campaign", "demo", "--db", str(db),
                                             "--format", "json"]).stdout)
    assert [lv["max_concurrency"] for lv in as_json["comparisons"][0]["load_levels"]] == [1, 3]
    # the report plots the ratio against load, from the same comparison
    from logpipe.report.html import build_report

    report = build_report(db, tmp_path / "report.html", plan="demo", with_checks=False)
    html = (tmp_path / "report.html").read_text()
    assert report.figures >= 1 and "fig-levels-0" in html and "break-even" in html


def test_launch_scrapes_the_engines_counters_around_each_level(tmp_path: Path) -> None:
    """Each level's bench runs between two ``/metrics`` snapshots (``metrics/`` in the run
    folder); ingested, ``counter_deltas`` holds the tokens the server generated in each
    level, which are the tokens the bench's own record counted.  A server that serves no
    counters is asked once, and the manifest says why none were taken."""
    port = free_port()
    db = tmp_path / "db.duckdb"
    res = launch(server(port, "--enable-metrics"),
                 LaunchOptions(name="counted", out=tmp_path / "counted", bench=bench(),
                               db=db, levels=(1.0, 3.0), stop_waits=FAST_STOP))
    assert res.status == "ok"
    assert sorted(p.name for p in (res.out / "metrics").iterdir()) == [
        "max_concurrency-1-after.prom", "max_concurrency-1-before.prom",
        "max_concurrency-3-after.prom", "max_concurrency-3-before.prom"]
    head = (res.out / "metrics" / "max_concurrency-3-after.prom").read_text().splitlines()[0]
    assert head.startswith("# logpipe-scrape: ") and '"phase": "after"' in head
    deltas = query(db, "SELECT d.level, d.delta, d.window_s > 0, d.engine FROM counter_deltas d "
                       "WHERE d.metric = 'generated_tokens' ORDER BY 1")
    benched = query(db, "SELECT max_concurrency, total_output_tokens FROM bench_results "
                        "ORDER BY 1")
    assert [(lv, tokens) for lv, tokens, _, _ in deltas] == [
        (float(c), float(t)) for c, t in benched]
    assert all(ok and engine == "sglang" for _, _, ok, engine in deltas)
    manifest = json.loads((res.out / "env.json").read_text())["launch"]
    assert manifest["counters"] == {"endpoint": "/metrics", "snapshots": 4, "status": "taken"}

    port = free_port()
    plain = launch(server(port), LaunchOptions(name="plain", out=tmp_path / "plain",
                                               bench=bench(), db=db, stop_waits=FAST_STOP))
    assert plain.status == "ok" and not (plain.out / "metrics").exists()
    said = json.loads((plain.out / "env.json").read_text())["launch"]["counters"]
    assert said["status"] == "not served" and "--enable-metrics" in said["message"]


def test_a_command_started_watched_names_its_group_before_it_runs() -> None:
    """The watchdog is started before what it watches, and the command names its own
    group on the lifeline before it becomes the command (named by logpipe after the start,
    a SIGKILL between the two left the bench running: the kill -9 test above, under
    load): the command's process is the command itself; the lifeline closed, as logpipe's
    death closes it, stops the group; a watchdog never told a group ends."""
    from logpipe.experiment.supervise import start_watched, watchdog

    sleeper, lifeline = start_watched(
        [sys.executable, "-c", "import time; time.sleep(59.5)"], dict(os.environ))
    try:
        deadline = time.monotonic() + 20
        cmdline = b""
        while b"sleep(59.5)" not in cmdline and time.monotonic() < deadline:
            cmdline = Path(f"/proc/{sleeper.pid}/cmdline").read_bytes()
            time.sleep(0.05)
        assert b"sleep(59.5)" in cmdline and os.getpgid(sleeper.pid) == sleeper.pid
        os.close(lifeline)
        assert sleeper.wait(timeout=20) != 0  # (killed: SIGTERM)
    finally:
        if sleeper.poll() is None:
            sleeper.kill()
    with pytest.raises(FileNotFoundError):
        start_watched(["no-such-command-anywhere"], dict(os.environ))
    unnamed = watchdog()
    os.close(unnamed)  # nothing started: the watchdog ends without a group
    deadline = time.monotonic() + 20
    while not no_children_left("os.killpg(group") and time.monotonic() < deadline:
        time.sleep(0.2)
    assert no_children_left("os.killpg(group")
