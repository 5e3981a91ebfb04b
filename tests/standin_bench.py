"""A small bench for the stand-in server: N generate requests, then a result record in the
shape of ``bench_serving``'s ``--output-file`` JSONL (0.5.x keys).

    python tests/standin_bench.py --port 30000 --num-prompts 6 --output-tokens 12
        [--output-file OUT.jsonl] [--max-concurrency N] [--fail]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--port", type=int, default=30000)
    p.add_argument("--num-prompts", type=int, default=6)
    p.add_argument("--output-tokens", type=int, default=12)
    p.add_argument("--output-file")
    p.add_argument("--max-concurrency", type=int, default=1,
                   help="requests in flight at once (recorded as the record's level)")
    p.add_argument("--fail", action="store_true")
    opts = p.parse_args()
    if opts.fail:
        print("bench: told to fail", flush=True)
        sys.exit(3)
    start = time.perf_counter()

    def one(_: int) -> None:
        body = json.dumps({"text": "hello", "sampling_params": {
            "max_new_tokens": opts.output_tokens}}).encode()
        req = urllib.request.Request(f"http://127.0.0.1:{opts.port}/generate", data=body,
                                     headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=30) as resp:  # noqa: S310 - localhost
            resp.read()

    with ThreadPoolExecutor(max(1, opts.max_concurrency)) as pool:
        list(pool.map(one, range(opts.num_prompts)))
    duration = time.perf_counter() - start
    out_tokens = opts.num_prompts * opts.output_tokens
    record = {
        "backend": "sglang", "dataset_name": "random-ids", "request_rate": float("inf"),
        "max_concurrency": opts.max_concurrency, "duration": duration,
        "completed": opts.num_prompts,
        "total_input_tokens": 64 * opts.num_prompts, "total_output_tokens": out_tokens,
        "request_throughput": opts.num_prompts / duration,
        "input_throughput": 64 * opts.num_prompts / duration,
        "output_throughput": out_tokens / duration,
        "mean_e2e_latency_ms": duration * 1000 / opts.num_prompts,
        "median_e2e_latency_ms": duration * 1000 / opts.num_prompts,
        "mean_ttft_ms": 2.0, "median_ttft_ms": 2.0, "p99_ttft_ms": 3.0,
        "mean_tpot_ms": duration * 1000 / out_tokens,
        "median_tpot_ms": duration * 1000 / out_tokens,
        "p99_tpot_ms": duration * 1200 / out_tokens, "concurrency": 1.0,
    }
    print(f"Successful requests: {opts.num_prompts}", flush=True)
    print(f"Output token throughput (tok/s): {out_tokens / duration:.2f}", flush=True)
    if opts.output_file:
        with open(opts.output_file, "a") as fh:
            fh.write(json.dumps(record) + "\n")


if __name__ == "__main__":
    main()
