"""PyTorch profiler traces: streaming reader, kernel classes, annotations, linking, memory.

The samples are real recordings (``scripts/make_torch_traces.py``): one on an H200 with
CUDA activities, one on a CPU.  Expected values are recomputed here from the JSON loaded
whole, the slow obvious way, and compared with what the streaming ingest stored.
"""

from __future__ import annotations

import gzip
import importlib.util
import io
import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from logpipe.ingest import ingest_paths
from logpipe.sources import torch_trace
from logpipe.sources.torch_trace import classify, iter_trace, name_parts
from tests.conftest import ROOT, SAMPLES, query

H200 = SAMPLES / "traces/h200-decode/1777885800.5-TP-0.trace.json.gz"
CPU = SAMPLES / "traces/cpu-decode/1777885700.1-TP-0.trace.json.gz"


def load(path: Path) -> dict[str, Any]:
    with gzip.open(path, "rt") as fh:
        return json.load(fh)


def test_streaming_reader_matches_json_load_at_any_chunk_size(monkeypatch: pytest.MonkeyPatch
                                                              ) -> None:
    whole = load(H200)
    raw = gzip.decompress(H200.read_bytes())
    for chunk in (7, 4096, 1 << 20):
        monkeypatch.setattr(torch_trace, "CHUNK_CHARS", chunk)
        meta, events = {}, []
        for kind, item in iter_trace(io.BytesIO(raw)):
            if kind == "meta":
                meta[item[0]] = item[1]
            else:
                assert kind == "event"
                events.append(item[1])
        assert events == whole["traceEvents"]
        assert meta == {k: v for k, v in whole.items() if k != "traceEvents"}


def test_array_format_and_a_cut_off_trace() -> None:
    events = [{"ph": "X", "cat": "kernel", "name": "k", "ts": 1.0, "dur": 2.0}] * 3
    got = list(iter_trace(io.BytesIO(json.dumps(events).encode())))
    assert [k for k, _ in got] == ["event"] * 3
    text = json.dumps({"schemaVersion": 1, "traceEvents": events}, indent=1)
    cut = text[: text.rindex('"dur"')]  # inside the last event
    kinds = [k for k, _ in iter_trace(io.BytesIO(cut.encode()))]
    assert kinds == ["meta", "event", "event", "truncated"]


@pytest.mark.parametrize(("name", "cls"), [
    ("ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevComm*, unsigned long, ncclWork*)",
     "communication"),
    ("void vllm::cross_device_reduce_1stage<__nv_bfloat16, 8>", "communication"),
    ("void flash::flash_fwd_splitkv_kernel<Flash_fwd_kernel_traits<128>>", "attention"),
    ("BatchDecodeWithPagedKVCacheKernel", "attention"),
    ("cudnn_generated_fort_native_sdpa_sm90_flash_fprop_wgmma_f16_knob_3", "attention"),
    ("nvjet_sm90_tst_64x8_64x16_4x1_v_bz_NNT", "gemm"),
    ("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64", "gemm"),
    ("fused_moe_kernel", "gemm"),
    ("void at::native::(anonymous namespace)::CatArrayBatchedCopy<float, 3>", "memory"),
    ("void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>>",
     "memory"),
    ("void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float>>", "elementwise"),
    # names seen in the real SGLang 0.5.23 traces on the H200 (Triton attention backend)
    ("_fwd_kernel", "attention"),
    ("_fwd_grouped_kernel_stage1", "attention"),
    ("_fwd_kernel_stage2", "attention"),
    ("void sglang::store_kvcache_kernel<512l, 512l, 32u, true, long>(sglang::Params)", "memory"),
    ("void at::native::elementwise_kernel<128, 4, at::native::gpu_kernel_impl_nocast<"
     "at::native::BinaryFunctor<float, float, float, at::native::MulFunctor<float>>>>",
     "elementwise"),
    ("void at::native::vectorized_elementwise_kernel<4, at::native::rsqrt_kernel_cuda>",
     "elementwise"),
])
def test_kernel_classes(name: str, cls: str) -> None:
    assert classify(name) == cls


def test_memcpy_and_memset_are_memory_whatever_their_name() -> None:
    assert classify("Memcpy DtoD (Device -> Device)", "gpu_memcpy") == "memory"
    assert classify("Memset (Device)", "gpu_memset") == "memory"


@pytest.mark.parametrize(("filename", "expected"), [
    ("1777885800.5-TP-0.trace.json.gz",
     {"profile_id": "1777885800.5", "tp_rank": 0, "dp_rank": None, "stage": None}),
    ("1777885800.5-TP-3-DP-1-PP-0-EP-3-DECODE.trace.json.gz",
     {"profile_id": "1777885800.5", "tp_rank": 3, "dp_rank": 1, "pp_rank": 0, "ep_rank": 3,
      "stage": "DECODE"}),
    ("exp7-1777885800.5-TP-1-EXTEND.trace.json.gz",
     {"profile_id": "exp7-1777885800.5", "tp_rank": 1, "stage": "EXTEND"}),
    ("merged-1777885800.5.trace.json.gz", {"profile_id": "1777885800.5", "merged": True}),
    ("1733000000.1.trace.json.gz", {"profile_id": "1733000000.1", "tp_rank": None}),
])
def test_file_names(filename: str, expected: dict[str, Any]) -> None:
    parts = name_parts(filename)
    assert {k: parts[k] for k in expected} == expected


def test_h200_trace_rows_match_the_json(sample_db: Path) -> None:
    whole = load(H200)
    events = whole["traceEvents"]
    key = str(H200.resolve())
    kernels = [e for e in events if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")]
    annotations = [e for e in events if e.get("cat") in ("user_annotation",
                                                         "gpu_user_annotation")]
    skipped = [e for e in events if e.get("ph") in ("M", "s", "t", "f")]
    (row,) = query(sample_db, "SELECT events, kernels, annotations, ops, skipped FROM traces "
                              "WHERE source_path = ?", [key])
    assert row == (len(events), len(kernels), len(annotations),
                   len(events) - len(kernels) - len(annotations) - len(skipped), len(skipped))
    got = query(sample_db, "SELECT round(sum(dur_us), 3), count(DISTINCT correlation) "
                           "FROM trace_kernels WHERE source_path = ?", [key])
    assert got == [(round(sum(e["dur"] for e in kernels), 3),
                    len({e["args"]["correlation"] for e in kernels}))]
    # each row points back at its event
    for event_no, name, dur in query(sample_db, "SELECT event_no, name, dur_us FROM "
                                     "trace_kernels WHERE source_path = ? USING SAMPLE 20",
                                     [key]):
        assert (events[event_no]["name"], events[event_no]["dur"]) == (name, dur)


def test_kernels_get_the_annotation_around_them(sample_db: Path) -> None:
    events = load(H200)["traceEvents"]
    key = str(H200.resolve())
    gpu_spans = [e for e in events if e.get("cat") == "gpu_user_annotation"]

    def around(k: dict[str, Any]) -> str | None:  # innermost by brute force
        inside = [a for a in gpu_spans if a["tid"] == k["tid"] and a["pid"] == k["pid"]
                  and a["ts"] <= k["ts"] < a["ts"] + a["dur"]]
        return max(inside, key=lambda a: a["ts"])["name"] if inside else None

    stored = dict(query(sample_db, "SELECT event_no, annotation FROM trace_kernels "
                                   "WHERE source_path = ?", [key]))
    expected = {i: around(e) for i, e in enumerate(events) if e.get("cat") == "kernel"}
    assert {i: stored[i] for i in expected} == expected
    assert set(expected.values()) == {"draft", "verify", "draft_extend"}
    steps = query(sample_db, "SELECT count(DISTINCT step), count(*) FILTER (step IS NULL) "
                             "FROM trace_kernels WHERE source_path = ?", [key])
    assert steps == [(6, 0)]  # six profiled cycles, every kernel inside one


def test_sql_answers_top_kernels_and_phase_shares(sample_db: Path) -> None:
    top = query(sample_db, "SELECT kernel_class, kernel, share FROM kernel_summary "
                           "WHERE run = 'h200-decode' ORDER BY total_ms DESC LIMIT 3")
    assert top[0][0] == "gemm" and top[0][1].startswith("nvjet_")
    (total,) = query(sample_db, "SELECT sum(share) FROM kernel_summary "
                                "WHERE run = 'h200-decode'")[0]
    assert total == pytest.approx(1.0)
    classes = dict(query(sample_db, "SELECT kernel_class, launches FROM kernel_class_summary "
                                    "WHERE run = 'h200-decode'"))
    assert {"gemm", "attention", "memory", "elementwise"} <= set(classes)
    shares = dict(query(sample_db, "SELECT annotation, kernel_share FROM annotation_summary "
                                   "WHERE run = 'h200-decode' AND kernels > 0"))
    assert set(shares) == {"draft", "verify", "draft_extend"}
    assert sum(shares.values()) == pytest.approx(1.0)


def test_trace_links_by_profile_id_and_feeds_env(sample_db: Path) -> None:
    rows = query(sample_db, "SELECT r.name, t.link_method, r.profiled FROM traces t "
                            "LEFT JOIN runs r USING (run_id) "
                            "WHERE t.source_path LIKE '%/traces/%' ORDER BY t.source_path")
    # its log bounds the profiler window (Profiling starts … Profiling done): the lines
    # inside it are profiled, the launch is not
    assert rows == [(None, None, None), ("h200-decode", "profile id", False)]
    env = dict(query(sample_db, "SELECT key, value || ' / ' || tier || ' / ' || source "
                                "FROM run_env JOIN runs USING (run_id) "
                                "WHERE name = 'h200-decode' AND key LIKE '%gpu%'"))
    trace = "trace 1777885800.5-TP-0.trace.json.gz"
    assert env["gpu.model"] == f"NVIDIA H200 / identity / {trace}"
    assert env["trace.gpu.compute_capability"] == f"9.0 / annotation / {trace}"


def test_manifest_value_wins_and_the_disagreement_is_noted(tmp_path: Path) -> None:
    run = tmp_path / "run"
    run.mkdir()
    (run / "server.log").write_bytes((SAMPLES / "traces/h200-decode/server.log").read_bytes())
    (run / H200.name).write_bytes(H200.read_bytes())
    manifest = {"logpipe_manifest": 1, "gpu": {"devices": [
        {"name": "NVIDIA H100 80GB HBM3", "memory_mib": 81559, "driver": "570.1"}]}}
    (run / "env.json").write_text(json.dumps(manifest))
    db = tmp_path / "t.duckdb"
    ingest_paths([run], db)
    rows = query(db, "SELECT value, source, conflict FROM run_env WHERE key = 'gpu.model'")
    assert rows == [("NVIDIA H100 80GB HBM3", str(run / "env.json"),
                     "trace 1777885800.5-TP-0.trace.json.gz says 'NVIDIA H200'")]


def test_reingest_is_unchanged_and_a_rewrite_replaces(tmp_path: Path) -> None:
    trace = tmp_path / H200.name
    trace.write_bytes(H200.read_bytes())
    db = tmp_path / "t.duckdb"
    first = ingest_paths([trace], db).files[0]
    assert first.status == "new" and first.rows["trace_kernels"] > 0
    assert ingest_paths([trace], db).files[0].status == "unchanged"
    whole = load(H200)
    whole["traceEvents"] = whole["traceEvents"][:100]
    with gzip.open(trace, "wt") as fh:
        json.dump(whole, fh)
    again = ingest_paths([trace], db).files[0]
    assert again.status == "rewritten"
    assert query(db, "SELECT count(*) FROM traces") == [(1,)]
    assert query(db, "SELECT max(event_no) FROM trace_ops") == [(99,)]


def test_a_trace_of_the_same_bytes_with_new_times_is_not_read_again(tmp_path: Path) -> None:
    """A trace copied anew (a fresh clone, a copy that kept no times: the same bytes, a new
    mtime) is unchanged on re-ingest, and its new mtime kept; one whose bytes changed at the
    same size (a digit edited in place) is read again."""
    import os

    trace = tmp_path / H200.name.removesuffix(".gz")  # (uncompressed: edited in place)
    trace.write_bytes(gzip.decompress(H200.read_bytes()))
    db = tmp_path / "t.duckdb"
    assert ingest_paths([trace], db).files[0].status == "new"
    later = trace.stat().st_mtime + 60
    os.utime(trace, (later, later))
    assert ingest_paths([trace], db).files[0].status == "unchanged"
    (mtime,) = query(db, "SELECT mtime FROM sources")[0]
    assert mtime.timestamp() == pytest.approx(later, abs=1e-3)
    data = trace.read_bytes()
    at = data.index(b'"dur": ') + len(b'"dur": ')
    edited = data[:at] + (b"8" if data[at:at + 1] != b"8" else b"9") + data[at + 1:]
    trace.write_bytes(edited)
    os.utime(trace, (later + 60, later + 60))
    assert len(edited) == len(data)
    assert ingest_paths([trace], db).files[0].status == "rewritten"


def test_cut_off_trace_keeps_complete_events_and_reports_the_line(tmp_path: Path) -> None:
    text = gzip.decompress(CPU.read_bytes()).decode()
    cut = text[: len(text) // 2]
    path = tmp_path / "1.0-TP-0.trace.json"
    path.write_text(cut)
    db = tmp_path / "t.duckdb"
    res = ingest_paths([path], db).files[0]
    assert res.status == "new"
    complete = cut.count('"ph": "X"') - (0 if cut.rstrip().endswith("}") else 1)
    (ops, annotations), = query(db, "SELECT ops, annotations FROM traces")
    assert ops + annotations in (complete, complete + 1)
    (line, reason), = query(db, "SELECT line_no, reason FROM rejects")
    assert "ends before traceEvents" in reason
    assert cut.split("\n")[line - 1].strip() == "{"  # where the incomplete event starts
    assert line == cut[:cut.rindex("\n  {")].count("\n") + 2  # the last event's "{"
    assert res.detail and f"line {line}" in res.detail


def test_malformed_trace_fails_with_its_line_and_leaves_nothing(tmp_path: Path) -> None:
    text = gzip.decompress(CPU.read_bytes()).decode()
    lines = text.split("\n")
    bad_line = len(lines) // 2
    lines[bad_line] = lines[bad_line] + " @@"
    path = tmp_path / "2.0-TP-0.trace.json"
    path.write_text("\n".join(lines))
    db = tmp_path / "t.duckdb"
    res = ingest_paths([path], db).files[0]
    assert res.status == "failed"
    assert f"{path}:{bad_line + 1}" in res.detail
    for table in ("traces", "trace_kernels", "trace_annotations", "trace_ops", "sources"):
        assert query(db, f"SELECT count(*) FROM {table}") == [(0,)]


def _benchmark() -> Any:
    spec = importlib.util.spec_from_file_location(
        "trace_memory", ROOT / "benchmarks" / "trace_memory.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.slow
def test_large_trace_is_read_in_bounded_memory(tmp_path: Path) -> None:
    """Peak memory of the reader does not follow the file: 6× the events, about the same
    RSS (the database's own share is measured by benchmarks/trace_memory.py)."""
    bench = _benchmark()
    peaks = []
    for size in (10_000_000, 60_000_000):
        path = tmp_path / f"{size}.trace.json"
        with path.open("w") as fh:
            bench.write_trace(fh, size)
        child = ("import resource, sys\n"
                 "from logpipe.sources.torch_trace import read_trace, TraceSummary\n"
                 "s = TraceSummary(); n = 0\n"
                 "for b in read_trace(open(sys.argv[1], 'rb'), s): n += len(b)\n"
                 "print(s.events, n, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)\n")
        out = subprocess.run([sys.executable, "-c", child, str(path)], check=True,
                             capture_output=True, text=True).stdout.split()
        events, rows, peak_kib = map(int, out)
        assert rows > 0 and events > rows
        peaks.append(peak_kib / 1024)
        path.unlink()
    assert peaks[1] < peaks[0] + 25, peaks  # MiB; a whole-file json.load would add ~500


def test_a_trimmed_trace_keeps_every_kernel_and_annotation(tmp_path: Path) -> None:
    """scripts/trim_trace.py (stdlib, for the GPU machine) drops CPU ops and Python frames
    only: the kernels, their classes and annotations, and the link stay the same."""
    src = SAMPLES / "traces" / "h200-decode"
    full, cut = tmp_path / "full", tmp_path / "cut"
    for d in (full, cut):
        shutil.copytree(src, d)
    (trace,) = cut.glob("*.trace.json.gz")
    done = subprocess.run([sys.executable, str(ROOT / "scripts" / "trim_trace.py"),
                           str(trace)], capture_output=True, text=True, check=True)
    assert "dropped cpu_op" in done.stdout
    counts = []
    for d in (full, cut):
        db = d / "db.duckdb"
        assert not ingest_paths([d], db).failed
        counts.append(query(db, "SELECT (SELECT count(*) FROM trace_ops), "
                                "(SELECT list(kernel_class || ':' || name || ':' || "
                                "coalesce(annotation, '') ORDER BY ts_us) FROM trace_kernels), "
                                "(SELECT count(*) FROM trace_annotations), "
                                "(SELECT link_method FROM traces)"))
    (ops_full, *rest_full), = counts[0]
    (ops_cut, *rest_cut), = counts[1]
    assert ops_cut < ops_full and rest_cut == rest_full
