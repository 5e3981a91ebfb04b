"""Small real vLLM files that were dropped or misread, each read exactly now (the forms
are the format reference's, shared/reference/vllm_formats.md)."""

from __future__ import annotations

from pathlib import Path

from logpipe.ingest import ingest_paths
from tests.conftest import SAMPLES, query

V0_STATS = ("INFO 08-19 22:41:06 [metrics.py:486] Avg prompt throughput: 0.0 tokens/s, Avg "
            "generation throughput: 26.9 tokens/s, Running: 3 reqs, Swapped: 0 reqs, Pending: "
            "0 reqs, GPU KV cache usage: 0.4%, CPU KV cache usage: 0.0%.")


def test_a_file_of_two_v0_speculative_metrics_lines(tmp_path: Path) -> None:
    (tmp_path / "spec.log").write_text(
        "INFO 11-03 14:07:52 metrics.py:400] Speculative metrics: Draft acceptance rate: "
        "0.612, System efficiency: 0.530, Number of speculative tokens: 4, Number of accepted "
        "tokens: 2458, Number of draft tokens: 4016, Number of emitted tokens: 3186.\n"
        "INFO 11-03 14:08:02 metrics.py:400] Speculative metrics: Draft acceptance rate: "
        "0.640, System efficiency: 0.551, Number of speculative tokens: 4, Number of accepted "
        "tokens: 2570, Number of draft tokens: 4016, Number of emitted tokens: 3313.\n")
    db = tmp_path / "d.duckdb"
    assert not ingest_paths([tmp_path], db).failed
    assert query(db, "SELECT accepted_tokens, drafted_tokens, acceptance_rate, "
                     "system_efficiency, emitted_tokens FROM vllm_spec_metrics ORDER BY "
                     "line_no") == [(2458, 4016, 0.612, 0.53, 3186),
                                    (2570, 4016, 0.64, 0.551, 3313)]


def test_a_terminal_wrapped_stats_line_keeps_its_gpu_kv_usage(tmp_path: Path) -> None:
    """Wrapped between two words (the space lost) or inside one: 0.4% on the GPU, never the
    CPU's 0% read as the line's."""
    between = V0_STATS.index("usage: 0.4%")
    inside = V0_STATS.index("ge: 0.4%")
    (tmp_path / "between.log").write_text(V0_STATS[:between].rstrip() + "\n"
                                          + V0_STATS[between:] + "\n")
    (tmp_path / "inside.log").write_text(V0_STATS[:inside] + "\n" + V0_STATS[inside:] + "\n")
    db = tmp_path / "d.duckdb"
    assert not ingest_paths([tmp_path], db).failed
    assert query(db, "SELECT kv_device, kv_usage, gen_tps, running FROM vllm_stats") == [
        ("GPU", 0.004, 26.9, 3), ("GPU", 0.004, 26.9, 3)]


def test_a_bare_engine_line_keeps_its_engine_index(tmp_path: Path) -> None:
    (tmp_path / "engine.log").write_text(
        "Engine 001: Avg prompt throughput: 512.0 tokens/s, Avg generation throughput: 9.8 "
        "tokens/s, Running: 2 reqs, Waiting: 3 reqs, GPU KV cache usage: 3.1%, Prefix cache "
        "hit rate: 25.0%\n")
    db = tmp_path / "d.duckdb"
    assert not ingest_paths([tmp_path], db).failed
    assert query(db, "SELECT engine_index, gen_tps, waiting FROM vllm_stats") == [(1, 9.8, 3)]


def test_a_bench_summary_pasted_with_bold_values_reads_them(tmp_path: Path) -> None:
    text = (SAMPLES / "mission" / "eagle3-untuned" / "bench_serving.txt").read_text()
    bold = text.replace("Output token throughput (tok/s):         73.80",
                        "**Output token throughput (tok/s):**     **73.80**")
    assert bold != text
    (tmp_path / "summary.txt").write_text(bold)
    db = tmp_path / "d.duckdb"
    assert not ingest_paths([tmp_path], db).failed
    assert query(db, "SELECT output_throughput FROM bench_results") == [(73.8,)]
