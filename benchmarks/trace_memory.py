"""Peak memory and speed of ingesting large PyTorch profiler traces.

Generates Kineto-shaped Chrome traces (the sample H200 trace's event mix: CPU ops, CUDA
runtime calls, kernels with correlation ids, record_function annotations, flow and
metadata events, pretty-printed the way Kineto writes them) of the given sizes, ingests
each into a fresh database in a child process, and prints MB/s and peak RSS.  Memory must
not grow with the file (the target: a 1 GB trace in well under 5 GB, in practice flat)::

    python benchmarks/trace_memory.py --sizes 100MB,1GB [--gzip]
"""

from __future__ import annotations

import argparse
import gzip
import json
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import IO

HEADER = """{
  "schemaVersion": 1,
  "deviceProperties": [
    {
      "id": 0, "name": "NVIDIA H200", "totalGlobalMem": 150109880320,
      "computeMajor": 9, "computeMinor": 0, "numSms": 132
    }
  ],
  "displayTimeUnit": "ms",
  "baseTimeNanoseconds": 1790857026000000000,
  "traceEvents": [
"""
KERNELS = ["nvjet_sm90_tst_128x64_64x8_2x1_v_bz_NNT",
           "void flash::flash_fwd_splitkv_kernel<Flash_fwd_kernel_traits<128>>(Flash_fwd_params)",
           "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevComm*, unsigned long, ncclWork*)",
           "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>>",
           "void at::native::(anonymous namespace)::CatArrayBatchedCopy<float, unsigned int, 3>"]


def _event(obj: dict[str, object]) -> str:
    """One event the way Kineto lays it out (several lines, indented)."""
    args = obj.pop("args")
    head = ", ".join(f'"{k}": {json.dumps(v)}' for k, v in obj.items())
    return "  {\n    " + head + ",\n    \"args\": {\n      " + ", ".join(
        f'"{k}": {json.dumps(v)}' for k, v in args.items()) + "\n    }\n  }"  # type: ignore[attr-defined]


def write_trace(out: IO[str], size: int, seed: int = 0) -> int:
    """Write a trace of about ``size`` characters; returns the events written."""
    rng = random.Random(seed)
    out.write(HEADER)
    written, n, ts, corr = len(HEADER), 0, 5092113848695.0, 1000
    first = True
    phases = ["draft", "verify", "draft_extend"]
    while written < size:
        block = []
        step_ts = ts
        for phase in phases:
            block.append({"ph": "X", "cat": "user_annotation", "name": phase, "pid": 452,
                          "tid": 452, "ts": round(ts, 3), "dur": 900.0,
                          "args": {"External id": n}})
            block.append({"ph": "X", "cat": "gpu_user_annotation", "name": phase, "pid": 0,
                          "tid": 7, "ts": round(ts + 20, 3), "dur": 880.0,
                          "args": {"External id": n}})
            for _ in range(6):
                corr += 1
                kname = rng.choice(KERNELS)
                block.append({"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 452,
                              "tid": 452, "ts": round(ts + 1, 3), "dur": 30.5,
                              "args": {"External id": corr, "Sequence number": corr,
                                       "Fwd thread id": 0, "Ev Idx": corr}})
                block.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel",
                              "pid": 452, "tid": 452, "ts": round(ts + 5, 3), "dur": 8.1,
                              "args": {"External id": corr, "cbid": 211, "correlation": corr}})
                block.append({"ph": "X", "cat": "kernel", "name": kname, "pid": 0, "tid": 7,
                              "ts": round(ts + 25, 3), "dur": round(rng.uniform(2, 120), 3),
                              "args": {"External id": corr, "queued": 0, "device": 0,
                                       "context": 1, "stream": 7, "correlation": corr,
                                       "registers per thread": 168, "shared memory": 164308,
                                       "grid": [132, 1, 1], "block": [384, 1, 1]}})
                block.append({"ph": "f", "id": corr, "pid": 0, "tid": 7,
                              "ts": round(ts + 25, 3), "cat": "ac2g", "name": "ac2g",
                              "bp": "e", "args": {}})
                ts += 140
        block.append({"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{n}",
                      "pid": 452, "tid": 452, "ts": round(step_ts - 1, 3),
                      "dur": round(ts - step_ts + 2, 3), "args": {"External id": n}})
        text = ",\n".join(_event(e) for e in block)
        out.write(text if first else ",\n" + text)
        first = False
        written += len(text) + 2
        n += len(block)
    tail = '\n  ],\n  "traceName": "generated.trace.json"\n}\n'
    out.write(tail)
    return n


CHILD = """
import resource, sys, time
from logpipe.ingest import ingest_paths
t = time.perf_counter()
r = ingest_paths([sys.argv[1]], sys.argv[2])
dt = time.perf_counter() - t
f = r.files[0]
print(f.status, f.rows.get("trace_kernels", 0), f"{dt:.3f}",
      resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
"""


def measure(trace: Path, db: Path) -> tuple[str, int, float, int]:
    """``(status, kernels, seconds, peak RSS in KiB)`` of one ingest in a fresh process."""
    out = subprocess.run([sys.executable, "-c", CHILD, str(trace), str(db)], check=True,
                         capture_output=True, text=True).stdout.split()
    return out[0], int(out[1]), float(out[2]), int(out[3])


def parse_size(text: str) -> int:
    units = {"KB": 1e3, "MB": 1e6, "GB": 1e9}
    for unit, factor in units.items():
        if text.upper().endswith(unit):
            return int(float(text[: -len(unit)]) * factor)
    return int(text)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", default="100MB,1GB")
    ap.add_argument("--gzip", action="store_true", help="write .trace.json.gz")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        print(f"{'size':>8} {'MB/s':>7} {'kernels':>9} {'peak RSS':>9}")
        for size_text in args.sizes.split(","):
            size = parse_size(size_text)
            suffix = ".trace.json.gz" if args.gzip else ".trace.json"
            trace = Path(tmp) / f"big-{size_text}-TP-0{suffix}"
            with (gzip.open(trace, "wt", compresslevel=1) if args.gzip
                  else trace.open("w")) as fh:
                write_trace(fh, size)
            t = time.perf_counter()
            status, kernels, seconds, rss_kib = measure(trace, Path(tmp) / f"{size_text}.duckdb")
            wall = time.perf_counter() - t
            print(f"{size_text:>8} {size / 1e6 / seconds:7.1f} {kernels:9d} "
                  f"{rss_kib / 1024:7.0f} MB   ({status}, {wall:.1f} s with start-up)")
            trace.unlink()


if __name__ == "__main__":
    main()
