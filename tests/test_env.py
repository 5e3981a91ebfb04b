"""Run environments: capture, discovery, tiers, fingerprints, diffs, secrets."""

from __future__ import annotations

import json
import shutil
import stat
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from logpipe.cli import app
from logpipe.env import Tiers, build_env, canonical, capture, fingerprint
from logpipe.ingest import ingest_paths
from tests.conftest import SAMPLES, query

runner = CliRunner()
MISSION = SAMPLES / "mission"


def test_capture_without_gpu_or_sglang(tmp_path: Path) -> None:
    environ = {"NCCL_ALGO": "Ring", "HF_TOKEN": "hf_secret_value", "HOME": "/root",
               "CUDA_VISIBLE_DEVICES": "0", "PATH": "/usr/bin"}
    m = capture(["python", "-m", "sglang.launch_server", "--tp", "2", "--api-key", "sk-1",
                 "--admin-api-key=sk-2"], environ=environ,
                nvidia_smi=str(tmp_path / "no-such-nvidia-smi"))
    assert m["gpu"]["available"] is False
    assert "not found" in m["gpu"]["reason"]
    assert m["env"] == {"CUDA_VISIBLE_DEVICES": "0", "HF_TOKEN": "<redacted>",
                        "NCCL_ALGO": "Ring"}
    assert "sglang" not in m["packages"]
    text = json.dumps(m)
    for secret in ("hf_secret_value", "sk-1", "sk-2"):
        assert secret not in text
    assert m["launch_args"]["tp_size"] == "2"
    assert m["host"]["name"]


def test_capture_reads_nvidia_smi(tmp_path: Path) -> None:
    fake = tmp_path / "nvidia-smi"
    fake.write_text(
        "#!/bin/sh\n"
        'if [ "$1" = "" ]; then echo "| NVIDIA-SMI 570.133.20   Driver Version: 570.133.20   '
        'CUDA Version: 12.8     |"; exit 0; fi\n'
        'echo "NVIDIA H200, 143771, 570.133.20, GPU-aaa"\n'
        'echo "NVIDIA H200, 143771, 570.133.20, GPU-bbb"\n')
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    m = capture(environ={}, nvidia_smi=str(fake))
    assert m["gpu"]["available"] is True
    assert m["gpu"]["cuda_version"] == "12.8"
    assert [d["name"] for d in m["gpu"]["devices"]] == ["NVIDIA H200", "NVIDIA H200"]
    assert m["gpu"]["devices"][0]["memory_mib"] == 143771


def test_cli_capture_writes_a_manifest(tmp_path: Path) -> None:
    out = tmp_path / "env.json"
    result = runner.invoke(app, ["env", "capture", "-o", str(out), "--", "python", "-m",
                                 "sglang.launch_server", "--tp", "8"])
    assert result.exit_code == 0, result.output
    m = json.loads(out.read_text())
    assert m["logpipe_manifest"] == 1
    assert m["launch_args"] == {"tp_size": "8"}
    assert result.stdout.startswith(f"Wrote {out}: ")


def test_capture_records_the_packages_of_the_interpreter_that_runs_the_server(
        tmp_path: Path) -> None:
    """The manifest's packages are those of the server's Python, named by the command
    (its first word, or the #! line of the script it runs), not logpipe's own."""
    import sys

    # a second environment, the server's, where "sglang 0.5.99" is installed
    import venv

    from logpipe.env import capture, interpreter_of
    other = tmp_path / "server-venv"
    venv.EnvBuilder(with_pip=False).create(other)
    py = other / "bin" / "python"
    site = next((other / "lib").glob("python3*/site-packages"))
    dist = site / "sglang-0.5.99.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: sglang\nVersion: 0.5.99\n")
    m = capture([str(py), "-m", "sglang.launch_server", "--tp", "2"])
    assert m["packages_of"] == str(py)
    assert m["packages"] == {"sglang": "0.5.99"}
    ours = capture([sys.executable, "-c", "pass"])
    assert ours["packages_of"] == sys.executable
    assert ours["packages"].get("sglang") != "0.5.99"
    script = tmp_path / "sglang"
    script.write_text(f"#!{py}\nprint('serve')\n")
    script.chmod(0o755)
    assert interpreter_of([str(script), "serve"]) == str(py)
    assert capture([str(script), "serve"])["packages_of"] == str(py)
    assert m["timezone"]["name"] and isinstance(m["timezone"]["utc_offset_s"], int)


def test_fingerprint_ignores_key_order_and_value_types() -> None:
    a = {"arg.tp_size": 8, "NCCL_ALGO": "Ring", "arg.mem_fraction_static": 0.85,
         "arg.disable_cuda_graph": False, "arg.quantization": None}
    b = {"arg.quantization": "None", "arg.disable_cuda_graph": "false",
         "arg.mem_fraction_static": "0.85", "NCCL_ALGO": "Ring", "arg.tp_size": "8"}
    assert fingerprint(a) == fingerprint(b)
    assert fingerprint(a) != fingerprint({**a, "NCCL_ALGO": "Tree"})
    assert canonical(8.0) == canonical("8") == "8"


def test_default_tiers() -> None:
    tiers = Tiers.load()
    assert tiers.tier("NCCL_ALGO") == "identity"
    assert tiers.tier("SGLANG_ENABLE_JIT_DEEPGEMM") == "identity"
    assert tiers.tier("MY_OWN_VAR") == "annotation"
    assert tiers.tier("arg.speculative_num_steps") == "treatment"
    assert tiers.tier("arg.port") == "annotation"
    assert tiers.tier("arg.tp_size") == "identity"
    assert tiers.tier("arg.some_future_flag") == "identity"
    assert tiers.tier("gpu.model") == "identity"
    assert tiers.tier("host.name") == "annotation"
    assert tiers.tier("NCCL_DEBUG") == "annotation"


def test_sglang_forced_variables_are_recorded_as_effective() -> None:
    manifest = {"env": {"CUDA_DEVICE_MAX_CONNECTIONS": "1"}, "packages": {"sglang": "0.5.12"}}
    env = build_env(tiers=Tiers.load(), manifests=[("m.json", manifest)])
    entry = env.entries["CUDA_DEVICE_MAX_CONNECTIONS"]
    assert entry.value == "8"
    assert entry.source == "sglang launch"
    assert "m.json says '1'" in (entry.conflict or "")
    # the variables are SGLang's rule: a vLLM server in an environment that also has the
    # SGLang package keeps what was declared
    vllm = build_env(tiers=Tiers.load(), manifests=[("m.json", manifest)], engine="vllm")
    assert vllm.entries["CUDA_DEVICE_MAX_CONNECTIONS"].value == "1"
    assert build_env(tiers=Tiers.load(), manifests=[("m.json", manifest)], engine="sglang"
                     ).entries["CUDA_DEVICE_MAX_CONNECTIONS"].value == "8"


def test_manifest_and_log_disagree_both_kept() -> None:
    manifest = {"launch_args": {"tp_size": "4"}}
    env = build_env(tiers=Tiers.load(), manifests=[("m.json", manifest)],
                    server_args={"tp_size": 8})
    entry = env.entries["arg.tp_size"]
    assert (entry.value, entry.source, entry.conflict) == (8, "server_args", "m.json says '4'")


def test_mission_fingerprints(sample_db: Path) -> None:
    rows = dict(query(sample_db, "SELECT name, env_fingerprint FROM runs "
                      "WHERE name IN ('baseline-untuned', 'baseline-tuned', 'eagle3-untuned')"))
    assert rows["baseline-untuned"] == rows["eagle3-untuned"]
    assert rows["baseline-tuned"] != rows["baseline-untuned"]
    complete = dict(query(sample_db, "SELECT name, env_complete FROM runs"))
    assert complete["eagle3-untuned"] is True and complete["plain"] is False
    assert query(sample_db, "SELECT engine_version FROM runs WHERE name = 'eagle3-untuned'") \
        == [("0.5.12",)]


def test_env_rows_are_queryable(sample_db: Path) -> None:
    rows = query(sample_db, "SELECT key, value, tier FROM run_env JOIN runs USING (run_id) "
                 "WHERE name = 'baseline-tuned' AND key LIKE 'NCCL_%' ORDER BY key")
    assert rows == [("NCCL_ALGO", "Ring", "identity"), ("NCCL_DEBUG", "INFO", "annotation"),
                    ("NCCL_IB_DISABLE", "1", "identity"), ("NCCL_P2P_LEVEL", "SYS", "identity"),
                    ("NCCL_PROTO", "LL", "identity")]


def test_env_diff_names_exactly_the_nccl_keys(sample_db: Path) -> None:
    result = runner.invoke(app, ["env", "diff", "--run", "eagle3-untuned", "--run",
                                 "baseline-tuned", "--db", str(sample_db), "--format", "json"])
    assert result.exit_code == 3
    d = json.loads(result.stdout)
    identity = [(i["key"], i["a"], i["b"]) for i in d["differences"] if i["tier"] == "identity"]
    assert identity == [("NCCL_ALGO", "(unset)", "Ring"), ("NCCL_P2P_LEVEL", "(unset)", "SYS"),
                        ("NCCL_PROTO", "(unset)", "LL")]
    text = runner.invoke(app, ["env", "diff", "--run", "eagle3-untuned", "--run",
                               "baseline-tuned", "--db", str(sample_db)])
    assert text.stdout.splitlines()[:2] == [
        "Identity differs in 3 key(s): eagle3-untuned and baseline-tuned are not comparable.",
        "identity:"]
    assert text.stdout.splitlines()[2].startswith("  NCCL_ALGO: (unset) → Ring  [- → ")


def test_env_diff_exit_codes(sample_db: Path) -> None:
    same = runner.invoke(app, ["env", "diff", "--run", "eagle3-untuned", "--run",
                               "baseline-untuned", "--db", str(sample_db)])
    assert same.exit_code == 0
    assert same.stdout.startswith("Identity tiers match")
    unknown = runner.invoke(app, ["env", "diff", "--run", "plain", "--run", "crlf",
                                  "--db", str(sample_db)])
    assert unknown.exit_code == 3
    assert "Environment of plain is unknown" in unknown.stdout
    one = runner.invoke(app, ["env", "diff", "--run", "plain", "--db", str(sample_db)])
    assert one.exit_code == 2


def test_env_show(sample_db: Path) -> None:
    result = runner.invoke(app, ["env", "show", "--run", "baseline-tuned", "--db",
                                 str(sample_db), "--format", "json"])
    assert result.exit_code == 0
    data = json.loads(result.stdout)
    assert data["complete"] is True
    assert data["env"]["NCCL_ALGO"]["source"].endswith("baseline-tuned/env.json")
    assert data["env"]["HF_TOKEN"]["value"] == "<redacted>"
    assert data["env"]["arg.tp_size"] == {"value": 8, "source": "server_args",
                                          "tier": "identity"}


def _layout(tmp_path: Path) -> Path:
    """root/env.json, root/a/env.json, root/a/b/server.log, root/a/b/server.log.env.json"""
    run = tmp_path / "root" / "a" / "b"
    run.mkdir(parents=True)
    shutil.copy(MISSION / "baseline-untuned" / "server.log", run / "server.log")
    (tmp_path / "root" / "env.json").write_text(json.dumps(
        {"env": {"NCCL_ALGO": "Tree", "NCCL_PROTO": "Simple", "OMP_NUM_THREADS": "8"}}))
    (tmp_path / "root" / "a" / "env.json").write_text(json.dumps(
        {"env": {"NCCL_ALGO": "Ring", "NCCL_PROTO": "LL"}}))
    return run


def env_of(db: Path) -> dict[str, tuple[str, str]]:
    return {k: (v, s) for k, v, s in query(db, "SELECT key, value, source FROM run_env")}


def test_discovery_precedence(tmp_path: Path) -> None:
    run = _layout(tmp_path)
    db = tmp_path / "d.duckdb"
    ingest_paths([tmp_path / "root"], db)
    env = env_of(db)
    # nearest folder env.json wins over the root's (which is not merged)
    assert env["NCCL_ALGO"] == ("Ring", str(tmp_path / "root" / "a" / "env.json"))
    assert "OMP_NUM_THREADS" not in env
    # a sidecar wins over the folder, the command line over both
    (run / "server.log.env.json").write_text(json.dumps({"env": {"NCCL_ALGO": "CollnetDirect"}}))
    ingest_paths([tmp_path / "root"], db)
    env = env_of(db)
    assert env["NCCL_ALGO"][0] == "CollnetDirect"
    assert env["NCCL_PROTO"] == ("LL", str(tmp_path / "root" / "a" / "env.json"))
    ingest_paths([tmp_path / "root"], db, env={"NCCL_ALGO": "NVLS"}, tags={"ticket": "42"})
    env = env_of(db)
    assert env["NCCL_ALGO"] == ("NVLS", "command line")
    assert env["tag.ticket"] == ("42", "command line")
    # a later ingest without --env keeps what the command line said before
    ingest_paths([tmp_path / "root"], db)
    assert env_of(db)["NCCL_ALGO"] == ("NVLS", "command line")


def test_ingest_root_bounds_discovery(tmp_path: Path) -> None:
    run = _layout(tmp_path)
    db = tmp_path / "d.duckdb"
    (tmp_path / "root" / "a" / "env.json").unlink()
    ingest_paths([run], db)  # the root's env.json is above the ingest root
    assert query(db, "SELECT env_complete FROM runs") == [(False,)]


def test_tier_override_file(tmp_path: Path, sample_db: Path) -> None:
    tiers = tmp_path / "tiers.toml"
    tiers.write_text('[[rules]]\ntier = "annotation"\nkeys = ["NCCL_ALGO", "NCCL_PROTO", '
                     '"NCCL_P2P_LEVEL"]\n')
    db = tmp_path / "t.duckdb"
    ingest_paths([MISSION], db, tiers_file=tiers)
    rows = dict(query(db, "SELECT name, env_fingerprint FROM runs"))
    assert rows["baseline-tuned"] == rows["baseline-untuned"]
    bad = tmp_path / "bad.toml"
    bad.write_text('[[rules]]\ntier = "important"\nkeys = ["X"]\n')
    result = runner.invoke(app, ["ingest", str(MISSION), "--db", str(db), "--tiers", str(bad)])
    assert result.exit_code == 2
    assert result.stderr.startswith(f"Error: unknown tier 'important' ({bad})")


def test_manifest_added_later_takes_effect(tmp_path: Path) -> None:
    folder = tmp_path / "logs" / "run1"
    folder.mkdir(parents=True)
    shutil.copy(MISSION / "baseline-tuned" / "server.log", folder / "server.log")
    db = tmp_path / "m.duckdb"
    ingest_paths([tmp_path / "logs"], db)
    assert query(db, "SELECT env_complete FROM runs") == [(False,)]
    shutil.copy(MISSION / "baseline-tuned" / "env.json", folder / "env.json")
    result = ingest_paths([tmp_path / "logs"], db)
    assert result.files[0].status == "unchanged"
    assert query(db, "SELECT env_complete FROM runs") == [(True,)]


def test_secret_in_manifest_never_reaches_database(tmp_path: Path) -> None:
    folder = tmp_path / "logs" / "run1"
    folder.mkdir(parents=True)
    shutil.copy(MISSION / "baseline-tuned" / "server.log", folder / "server.log")
    (folder / "env.json").write_text(json.dumps({
        "env": {"HF_TOKEN": "hf_live_abc", "WANDB_API_KEY": "wb_live_def", "NCCL_ALGO": "Ring"},
        "command": "python -m sglang.launch_server --api-key sk_live_ghi",
        "launch_args": {"api_key": "sk_live_ghi"}}))
    db = tmp_path / "s.duckdb"
    ingest_paths([tmp_path / "logs"], db, env={"MY_SECRET": "shh_jkl"})
    dump = json.dumps([query(db, f"SELECT * FROM {t}") for t in
                       ("runs", "run_env", "events", "batches")], default=str)
    for secret in ("hf_live_abc", "wb_live_def", "shh_jkl"):
        assert secret not in dump
    # a command line stored as text is redacted at ingest too
    assert "sk_live_ghi" not in dump


def test_bad_manifest_fails_the_file_with_its_location(tmp_path: Path) -> None:
    folder = tmp_path / "logs"
    folder.mkdir()
    shutil.copy(MISSION / "baseline-tuned" / "server.log", folder / "server.log")
    (folder / "env.json").write_text('{"env": {"NCCL_ALGO": "Ring",}}\n')
    db = tmp_path / "b.duckdb"
    result = runner.invoke(app, ["ingest", str(folder), "--db", str(db)])
    assert result.exit_code == 2
    assert f"manifest is not valid JSON: Expecting property name enclosed in double quotes " \
           f"({folder / 'env.json'}:1)" in result.stdout
    assert query(db, "SELECT count(*) FROM runs") == [(0,)]


def test_launches_repeating_their_arguments_share_an_environment_and_others_do_not(
        tmp_path: Path) -> None:
    """Ingest builds a launch's environment once for launches of a file with the same
    inputs: each run still has its own rows, equal to those of the launch alone, and a
    launch with another argument between them gets its own environment."""
    one = (SAMPLES / "eras" / "v0.5.23.log").read_text()
    other = one.replace("'tp_size': 1", "'tp_size': 2")
    assert other != one
    log = tmp_path / "many" / "server.log"
    log.parent.mkdir()
    log.write_text(one + one.replace("2026-03-01 10:", "2026-03-01 11:")
                   + other.replace("2026-03-01 10:", "2026-03-01 12:")
                   + one.replace("2026-03-01 10:", "2026-03-01 13:"))
    alone = tmp_path / "alone" / "server.log"
    alone.parent.mkdir()
    alone.write_text(one)
    db, db_alone = tmp_path / "db.duckdb", tmp_path / "alone.duckdb"
    ingest_paths([log], db)
    ingest_paths([alone], db_alone)  # (in a database of its own: not a copy of the first)

    def env_of(run_id: str, where: Path = db) -> list[tuple]:
        return query(where, "SELECT key, value, tier, source, conflict FROM run_env "
                            "WHERE run_id = ? ORDER BY key", [run_id])

    runs = query(db, "SELECT run_id, env_fingerprint, env FROM runs ORDER BY run_seq")
    (single,) = query(db_alone, "SELECT run_id, env_fingerprint, env FROM runs")
    assert len(runs) == 4
    for i in (0, 1, 3):
        assert runs[i][1:] == single[1:]
        assert env_of(runs[i][0]) == env_of(single[0], db_alone)
    assert runs[2][1] != single[1]
    changed = set(env_of(runs[2][0])) ^ set(env_of(single[0], db_alone))
    assert {r[0] for r in changed} == {"arg.tp_size"}


def test_environment_json_and_canonical_texts_are_those_of_json_dumps_memoised_or_not(
        ) -> None:
    """A launch's environment text and its fingerprint's canonical values are memoised
    per value: the texts are json.dumps' and _canonical's for values == cannot tell apart
    (1, 1.0, True; 0.0, -0.0), lists, non-ASCII text and conflicts, twice over."""
    import json

    from logpipe.env import model
    from logpipe.env.model import Entry, RunEnv

    values = [1, 1.0, True, False, 0, 0.0, -0.0, None, "1", "true", "naïve ☃", "",
              [1, 2], {"a": [1, 2.5]}, float("nan"), float("inf"), 2**70, 1e-300, "8.0"]
    for _ in range(2):
        env = RunEnv({f"k{i}.{j}": Entry(v, src, tier, conflict)
                      for i, v in enumerate(values)
                      for j, (src, tier, conflict) in enumerate(
                          [("log", "identity", None), ("server_args", "annotation",
                                                        "manifest says 'x'")])})
        assert env.to_json() == json.dumps(
            {k: e.as_json() for k, e in sorted(env.entries.items())}, default=str)
        assert [model.canonical(v) for v in values] == [model._canonical(v) for v in values]
        assert model.canonical(-0.0) == "0" and model.canonical(True) == "true" \
            and model.canonical(1.0) == "1"
    for a, b in ((1, True), (0.0, -0.0), (1, 1.0)):  # one key, values == cannot tell apart
        assert RunEnv({"a": Entry(a, "log")}).to_json() == json.dumps(
            {"a": {"value": a, "source": "log", "tier": "annotation"}})
        assert RunEnv({"a": Entry(b, "log")}).to_json() == json.dumps(
            {"a": {"value": b, "source": "log", "tier": "annotation"}})


def _rendered_alone(env: object) -> tuple[str, str, list[str]]:
    from logpipe.env import render

    r = render(env)  # type: ignore[arg-type]
    return r.json, r.fingerprint, r.keys


_KEYS = st.sampled_from([f"arg.k{i}" for i in range(12)] + ["NCCL_ALGO", "effective.x",
                                                              "tag.t"])
_SPECS = st.tuples(st.sampled_from([0, 1, 1.0, True, None, "a", "1", [1, 2]]),
                   st.sampled_from(["server_args", "log", "manifest"]),
                   st.sampled_from(["identity", "annotation", "capacity"]),
                   st.sampled_from([None, "manifest says 'x'"]))


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(_KEYS, _SPECS, min_size=8),
       st.lists(st.lists(st.tuples(_KEYS, st.none() | _SPECS), min_size=1, max_size=3),
                max_size=8),
       st.randoms(use_true_random=False))
def test_an_environment_rendered_from_the_launch_before_is_the_one_rendered_alone(
        first: dict[str, tuple[object, str, str, str | None]],
        edits: list[list[tuple[str, tuple[object, str, str, str | None] | None]]],
        rnd: object) -> None:
    """Each launch of a file is rendered from the one before (a few entries changed, added
    or removed; an entry of the same key with another tier moves in or out of the
    fingerprint): the texts, the fingerprint and the key order are those of the
    environment rendered alone, and of json.dumps."""
    import random

    from logpipe.env import Entry, RunEnv, render

    assert isinstance(rnd, random.Random)
    shared: dict[tuple[object, ...], Entry] = {}  # (entries shared as build_env shares them)
    spec = dict(first)
    before = None
    for step in [[], *edits]:
        for key, change in step:
            if change is None:
                spec.pop(key, None)
            else:
                spec[key] = change
        entries = {}
        for key, (value, source, tier, conflict) in spec.items():
            memo = (key, type(value), repr(value), source, tier, conflict)
            fresh = Entry(value, source, tier, conflict)
            entries[key] = fresh if rnd.random() < 0.2 else shared.setdefault(memo, fresh)
        env = RunEnv(entries)
        before = render(env, like=before)
        assert (before.json, before.fingerprint, before.keys) == _rendered_alone(env)
        assert before.json == json.dumps({k: e.as_json() for k, e in sorted(entries.items())},
                                         default=str)
        assert before.fingerprint == fingerprint(
            {k: e.value for k, e in entries.items() if e.tier == "identity"})


def test_a_launch_built_from_the_launch_before_tells_composite_values_apart() -> None:
    """A list or dict argument is the launch before's entry only where its text is the
    same: a dict's keys in another order, [1] after [1.0] or [True] are made again."""
    from logpipe.env import launch_layers, render

    tiers = Tiers.load()
    before = None
    for value in ({"a": 1, "b": [2]}, {"b": [2], "a": 1}, {"b": [2], "a": 1}, [1.0], [1],
                  [True], [True], [[1], {"x": None}], [[1.0], {"x": None}]):
        args = {"cuda_graph_config": value, "tp_size": 1}
        before = launch_layers(tiers=tiers, server_args=args, engine="sglang", like=before)
        alone = launch_layers(tiers=tiers, server_args=args, engine="sglang")
        assert render(before.env).json == render(alone.env).json, value
        assert render(before.env).fingerprint == render(alone.env).fingerprint, value


_ARGS = st.sampled_from(["tp_size", "port", "random_seed", "api_key", "cuda_graph_bs",
                         "mem_fraction_static", "speculative_algorithm", "disable_x"])
_VALUES = st.sampled_from([0, 1, 1.0, True, False, None, -0.0, 0.0, "", "EAGLE3", "1",
                           [1, 2], [1.0, 2], [], {}, [[1], {"a": 1}], [[1], {"a": True}],
                           {"a": 1, "b": [2]}, {"b": [2], "a": 1}, {"a": 1, "b": [2.0]}])


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(_ARGS, _VALUES, min_size=1),
       st.lists(st.lists(st.tuples(_ARGS, st.none() | _VALUES), min_size=1, max_size=2),
                max_size=6),
       st.dictionaries(_ARGS, _VALUES, max_size=3))
def test_a_launch_built_from_the_launch_before_is_the_one_built_alone(
        first: dict[str, object], edits: list[list[tuple[str, object]]],
        in_manifest: dict[str, object]) -> None:
    """Each launch's configuration layers are built from the launch before (its changed,
    added and removed arguments made again; a removed one a manifest also names falls
    back to the manifest's entry; 1, 1.0 and True, 0.0 and -0.0, [1] and [1.0], dicts of
    other key orders told apart): its environment is the one built from scratch."""
    from logpipe.env import launch_layers, render

    tiers = Tiers.load()
    manifests = [("env.json", {"env_captured": True,
                               "launch_args": dict(in_manifest),
                               "env": {"NCCL_ALGO": "Ring"}})]
    args = dict(first)
    before = None
    for step in [[], *edits]:
        for key, change in step:
            if change is None:
                args.pop(key, None)
            else:
                args[key] = change
        before = launch_layers(tiers=tiers, manifests=manifests, server_args=args,
                               format_era="0.5.x", engine="sglang", like=before)
        alone = launch_layers(tiers=tiers, manifests=manifests, server_args=args,
                              format_era="0.5.x", engine="sglang").env
        assert render(before.env).json == render(alone).json
        assert before.env.complete == alone.complete
        assert before.env.manifests == alone.manifests


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.text(), st.text()), max_size=12))
def test_a_fingerprint_is_the_hash_of_its_pairs_json(items: list[tuple[str, str]]) -> None:
    """Fingerprints are written from each pair's memoised text: the digest is still that
    of ``json.dumps`` of the pairs (a fingerprint stored by an earlier ingest compares
    equal), with quotes, escapes and non-ASCII keys and values, pairs seen before or not."""
    import hashlib

    from logpipe.env.model import _digest

    want = hashlib.sha256(json.dumps(items, separators=(",", ":")).encode()).hexdigest()[:16]
    assert _digest(items) == want
    assert _digest(items) == want  # (the second time from the memo)


def test_arguments_about_tokens_are_not_taken_for_secrets() -> None:
    """Of SGLang 0.5.23's printed arguments, those whose names hold "token" or "key" and are
    not credentials keep their values (a latency bucket list and a two-batch-overlap
    threshold were redacted, hiding a setting from every comparison); credentials stay
    redacted."""
    from logpipe.redaction import is_secret_key

    for key in ("bucket_time_to_first_token", "bucket_inter_token_latency",
                "tbo_token_distribution_threshold", "max_total_tokens", "speculative_token_map",
                "num_reserved_decode_tokens", "kt_max_deferred_experts_per_token"):
        assert not is_secret_key(key), key
    for key in ("api_key", "admin_api_key", "HF_TOKEN", "hf_token", "HUGGING_FACE_HUB_TOKEN",
                "ssl_keyfile_password", "watermark_key", "auth_token", "access_token",
                "WANDB_API_KEY"):
        assert is_secret_key(key), key
