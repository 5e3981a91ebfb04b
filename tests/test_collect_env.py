"""``collect_env`` reports as environment manifests.  The two reports in tests/collect_env/
are real: ``python -m vllm.collect_env`` of the vLLM 0.32.0 CPU build and ``python -m
torch.utils.collect_env`` of its torch 2.13, run on this machine kind with
``NCCL_ALGO=Ring OMP_NUM_THREADS=2 VLLM_CPU_KVCACHE_SPACE=1``."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from logpipe import collect_env
from logpipe.analysis.compare import compare
from logpipe.errors import InputError
from logpipe.ingest import ingest_paths
from tests.conftest import SAMPLES, query

REPORTS = Path(__file__).resolve().parent / "collect_env"
VLLM_REPORT = REPORTS / "vllm-0.32-cpu.txt"
TORCH_REPORT = REPORTS / "torch-2.13-cpu.txt"
RUNS = SAMPLES / "real-vllm-cpu"


def test_a_vllm_report_gives_packages_variables_and_no_gpu() -> None:
    m = collect_env.load(VLLM_REPORT)
    assert m["env_captured"] is True
    # vLLM sets PYTORCH_NVML_BASED_CUDA_CHECK and TORCHINDUCTOR_COMPILE_THREADS itself in
    # every process: the report shows them, they are not the user's
    assert m["env"] == {"VLLM_CPU_KVCACHE_SPACE": "1", "OMP_NUM_THREADS": "2",
                        "NCCL_ALGO": "Ring",
                        "TORCHINDUCTOR_CACHE_DIR": "/tmp/torchinductor_root"}
    assert m["packages"]["torch"] == "2.13.0+cpu"
    assert m["packages"]["vllm"] == "0.32.0"
    assert "could" not in m["packages"]  # "[conda] Could not collect" is no package
    assert m["gpu"] == {}  # a CPU build prints no CUDA section
    assert "cuda" not in m  # "CUDA used to build PyTorch: Could not collect"
    assert m["host"]["os"].startswith("Debian GNU/Linux 12")


def test_a_torch_report_leaves_the_variables_unknown() -> None:
    m = collect_env.load(TORCH_REPORT)
    assert m["env_captured"] is False and "env" not in m
    assert m["gpu"] == {"available": False}
    assert m["cuda"] == {"runtime": "13.0.88"}
    assert m["packages"]["torch"] == "2.13.0+cpu"


def test_gpus_driver_and_cuda_build_from_the_report_lines() -> None:
    # the GPU block as both reports print it (torch: ``label: value``; the names are
    # ``nvidia-smi -L`` lines with the UUID removed); the driver is the H200 sample's, the CUDA
    # versions examples
    text = (VLLM_REPORT.read_text()
            .replace("CUDA used to build PyTorch   : Could not collect",
                     "CUDA used to build PyTorch   : 12.8")
            .replace("==============================\n          CPU Info",
                     "==============================\n       CUDA / GPU Info\n"
                     "==============================\n"
                     "Is CUDA available            : True\n"
                     "CUDA runtime version         : 12.8.93\n"
                     "GPU models and configuration : \nGPU 0: NVIDIA H200\nGPU 1: NVIDIA H200\n"
                     "\nNvidia driver version        : 580.159.04\n"
                     "==============================\n          CPU Info"))
    m = collect_env.parse(text, Path("collect_env.txt"))
    assert m["gpu"]["devices"] == [{"name": "NVIDIA H200", "driver": "580.159.04"}] * 2
    assert m["cuda"] == {"torch_build": "12.8", "runtime": "12.8.93"}


def test_a_file_that_is_no_report_is_refused_by_name(tmp_path: Path) -> None:
    bad = tmp_path / "collect_env.txt"
    bad.write_text("remember to run collect_env before the next launch\n")
    with pytest.raises(InputError) as err:
        collect_env.load(bad)
    assert str(bad) in str(err.value) and "collect_env" in str(err.value)


def _runs_with_reports(root: Path, nccl: tuple[str, str]) -> Path:
    """The two real vLLM baseline launches, their logs only, each folder with the real
    report (its NCCL_ALGO set to ``nccl[i]``) instead of logpipe's own env.json."""
    for name, algo in zip(("real-vllm-cpu-baseline-r1", "real-vllm-cpu-baseline-r2"), nccl,
                          strict=True):
        folder = root / name
        folder.mkdir(parents=True)
        shutil.copy(RUNS / name / "server.log", folder / "server.log")
        (folder / "collect_env.txt").write_text(
            VLLM_REPORT.read_text().replace("NCCL_ALGO=Ring", f"NCCL_ALGO={algo}"))
    return root


def test_a_report_beside_a_vllm_log_completes_its_environment(tmp_path: Path) -> None:
    db = tmp_path / "db.duckdb"
    result = ingest_paths([_runs_with_reports(tmp_path / "logs", ("Ring", "Ring"))], db)
    assert not result.failed
    assert [f.path for f in result.files if "collect_env" in f.path] == []  # not a log
    rows = query(db, "SELECT name, env_complete, env FROM runs ORDER BY name")
    assert [(n, c) for n, c, _ in rows] == [("real-vllm-cpu-baseline-r1", True),
                                            ("real-vllm-cpu-baseline-r2", True)]
    env = json.loads(rows[0][2])
    assert env["NCCL_ALGO"]["value"] == "Ring"
    assert env["NCCL_ALGO"]["source"].endswith("collect_env.txt")
    assert env["pkg.torch"]["value"] == "2.13.0+cpu"
    (same,) = compare(str(db), ["real-vllm-cpu-baseline-r1", "real-vllm-cpu-baseline-r2"])
    assert same.env_status == "comparable", same.notes
    assert same.exit_code == 0  # an A/A pair is never a regression


def test_reports_that_differ_in_nccl_refuse_the_comparison(tmp_path: Path) -> None:
    db = tmp_path / "db.duckdb"
    assert not ingest_paths([_runs_with_reports(tmp_path / "logs", ("Ring", "Tree"))],
                            db).failed
    (refused,) = compare(str(db), ["real-vllm-cpu-baseline-r1", "real-vllm-cpu-baseline-r2"])
    assert refused.verdict == "incomparable" and refused.exit_code == 3
    assert any("NCCL_ALGO" in n for n in refused.notes), refused.notes


def test_a_torch_report_alone_does_not_make_the_environment_known(tmp_path: Path) -> None:
    folder = tmp_path / "logs" / "real-vllm-cpu-baseline-r1"
    folder.mkdir(parents=True)
    shutil.copy(RUNS / folder.name / "server.log", folder / "server.log")
    shutil.copy(TORCH_REPORT, folder / "server.log.collect_env.txt")  # a sidecar
    db = tmp_path / "db.duckdb"
    assert not ingest_paths([tmp_path / "logs"], db).failed
    ((complete, env),) = query(db, "SELECT env_complete, env FROM runs")
    assert complete is False
    assert json.loads(env)["cuda.runtime"]["value"] == "13.0.88"
