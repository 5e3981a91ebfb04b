"""A stand-in for an SGLang 0.5.23 server on a CPU, for the tests of `launch` and `ab`.

It prints the lines the real engine prints (``sample_logs/real-cpu/``): the settings SGLang
changes itself, ``server_args={...}``, weights, KV cache, the capacity line, uvicorn's
lines, the warm-up prefill, the ready line, then a ``Prefill batch`` and ``Decode batch``
lines (``cpu graph: False``) for each generate request, and answers ``/health``,
``/server_info``, ``/get_server_info``, ``/generate`` and ``/v1/completions`` on
127.0.0.1.  It can be told to die during load, to never become ready, to start slowly, or
to ignore SIGINT.

    python tests/standin_server.py --port 30000 [--speculative-algorithm NGRAM]
        [--tps 700 | env STANDIN_TPS] [--die-during-load] [--hang] [--slow-start S]
        [--ignore-sigint]
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import random
import signal
import sys
import threading
import time
from datetime import datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

LOCK = threading.Lock()


def say(msg: str) -> None:
    with LOCK:
        sys.stdout.write(f"[{datetime.now():%Y-%m-%d %H:%M:%S}] {msg}\n")
        sys.stdout.flush()


def metrics_text(opts: argparse.Namespace, state: dict[str, Any]) -> str:
    """``/metrics`` in the shape SGLang 0.5.23 serves it (``--enable-metrics``): the
    tokenizer's counters of the requests served so far, under its names and labels."""
    labels = f'engine_type="unified",is_streaming="true",model_name="{opts.model_path}"'
    with LOCK:
        tokens, finished = state.get("generated", 0), state.get("finished", 0)
    return (
        "# HELP sglang:generation_tokens_total Number of generation tokens processed.\n"
        "# TYPE sglang:generation_tokens_total counter\n"
        f"sglang:generation_tokens_total{{{labels}}} {float(tokens)}\n"
        "# HELP sglang:num_requests_total The number of requests.\n"
        "# TYPE sglang:num_requests_total counter\n"
        f"sglang:num_requests_total{{{labels}}} {float(finished)}\n")


def server_args(opts: argparse.Namespace) -> dict[str, Any]:
    spec = opts.speculative_algorithm
    return {
        "model_path": opts.model_path, "tokenizer_path": opts.model_path,
        "tokenizer_mode": "auto", "load_format": "auto", "trust_remote_code": False,
        "context_length": None, "is_embedding": False, "dtype": "auto",
        "kv_cache_dtype": "auto", "quantization": None, "device": "cpu",
        "host": opts.host, "port": opts.port, "mem_fraction_static": 0.716,
        "max_running_requests": 48 if spec else None, "max_total_tokens": 8192,
        "chunked_prefill_size": 4096, "max_prefill_tokens": 16384,
        "schedule_policy": "fcfs", "tp_size": 1, "dp_size": 1, "pp_size": 1, "ep_size": 1,
        "random_seed": 42, "log_level": "info", "decode_log_interval": 1,
        "attention_backend": "torch_native", "disable_cuda_graph": False,
        "cuda_graph_config": {"decode": {"backend": "disabled", "max_bs": 48 if spec else 32,
                                         "bs": [1, 2, 4, 8, 16, 32]},
                              "prefill": {"backend": "disabled", "max_bs": 4096}},
        "disable_overlap_schedule": bool(spec),
        "speculative_algorithm": spec,
        "speculative_num_draft_tokens": 12 if spec else None,
        "speculative_num_steps": opts.speculative_num_steps,
        "api_key": None,
    }


class Handler(BaseHTTPRequestHandler):
    opts: argparse.Namespace
    state: dict[str, Any] = {"ready": False, "running": 0}

    def log_message(self, *args: Any) -> None:  # uvicorn's access line instead
        pass

    def _reply(self, code: int, body: Any) -> None:
        data = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)
        say(f'INFO:     {self.client_address[0]}:{self.client_address[1]} - '
            f'"{self.command} {self.path} HTTP/1.1" {code} '
            f'{"OK" if code == 200 else "Service Unavailable"}')

    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        if self.path == "/health":
            self._reply(200 if self.state["ready"] else 503, {})
        elif self.path in ("/server_info", "/get_server_info"):
            self._reply(200, {**server_args(self.opts), "version": "0.5.23"})
        elif self.path == "/model_info":
            self._reply(200, {"model_path": self.opts.model_path})
        elif self.path == "/metrics" and self.opts.enable_metrics:
            self._text(metrics_text(self.opts, self.state))
        else:
            self._reply(404, {})

    def _text(self, text: str) -> None:
        data = text.encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_POST(self) -> None:  # noqa: N802
        length = int(self.headers.get("Content-Length") or 0)
        try:
            req = json.loads(self.rfile.read(length) or b"{}")
        except ValueError:
            req = {}
        if self.path == "/start_profile":
            self._start_profile(req)
            return
        if self.path not in ("/generate", "/v1/completions"):
            self._reply(404, {})
            return
        n = (int(req.get("max_tokens", 16)) if self.path == "/v1/completions" else
             int((req.get("sampling_params") or {}).get("max_new_tokens", 16)))
        self.state["served"] = self.state.get("served", 0) + 1
        if self.opts.die_after and self.state["served"] > self.opts.die_after:
            say("Scheduler hit an exception: stand-in told to die after "
                f"{self.opts.die_after} requests")
            os._exit(1)
        generate(self.opts, n, self.state)
        with LOCK:
            self.state["generated"] = self.state.get("generated", 0) + n
            self.state["finished"] = self.state.get("finished", 0) + 1
        self._reply(200, {"text": "x" * n, "meta_info": {"completion_tokens": n}})


    def _start_profile(self, req: dict[str, Any]) -> None:
        """As SGLang 0.5.23: the profiler starts at once and, with num_steps, stops by
        itself after that many scheduler steps (decode lines here) and writes its trace."""
        out = req.get("output_dir") or "/tmp"
        pid = f"{time.time():.6f}"
        with LOCK:
            PROFILE.update(dir=out, id=pid, left=int(req.get("num_steps") or 0),
                           activities=req.get("activities"), with_stack=req.get("with_stack"))
        say(f"Profiling starts. Traces will be saved to: {out} (with profile id: {pid})")
        self._reply(200, {"success": True, "message": "Start profiling."})


PROFILE: dict[str, Any] = {}
"""The open profile (a ``/start_profile`` not yet done), as the stand-in's scheduler
knows it."""


def profile_step() -> None:
    """One scheduler step under an open profile; after the last, the trace is written."""
    with LOCK:
        if not PROFILE.get("left"):
            return
        PROFILE["left"] -= 1
        if PROFILE["left"]:
            return
        out, pid = Path(PROFILE["dir"]), PROFILE["id"]
        stacks = PROFILE.get("with_stack") is not False  # SGLang's default: on
        PROFILE.clear()
    say("Stop profiling...")
    out.mkdir(parents=True, exist_ok=True)
    now_us = time.time() * 1e6
    trace = {"schemaVersion": 1, "traceEvents": [
        {"ph": "X", "cat": "user_annotation", "name": "step[DECODE bs=1]", "pid": 1,
         "tid": 1, "ts": now_us, "dur": 1000.0},
        {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1,
         "ts": now_us + 10, "dur": 500.0}]}
    if stacks:  # with_stack: a Python frame per call, the bulk of a real trace
        trace["traceEvents"] += [
            {"ph": "X", "cat": "python_function", "name": f"scheduler.py({i}): step",
             "pid": 1, "tid": 1, "ts": now_us + 20 + i, "dur": 1.0} for i in range(50)]
    with gzip.open(out / f"{pid}-TP-0.trace.json.gz", "wt") as fh:
        json.dump(trace, fh)
    say(f"Profiling done. Traces are saved to: {out}")


def generate(opts: argparse.Namespace, tokens: int, state: dict[str, Any]) -> None:
    rng = random.Random(tokens + state["running"])
    with LOCK:
        state["running"] += 1
    running = state["running"]
    say(f"Prefill batch, #new-seq: 1, #new-token: 64, #cached-token: 0, token usage: 0.01, "
        f"#running-req: {running - 1}, #queue-req: 0, #pending-token: 0, cpu graph: False, "
        f"input throughput (token/s): {opts.tps * 6 * rng.uniform(0.9, 1.1):.2f}")
    used = 64
    for _ in range(tokens):
        time.sleep(1.0 / opts.tps)
        used += 1
        spec = ""
        if opts.speculative_algorithm:
            al = rng.uniform(1.1, 1.5)
            spec = f"accept len: {al:.2f}, accept rate: {(al - 1) / 11:.2f}, "
        say(f"Decode batch, #running-req: {running}, #token: {used}, token usage: "
            f"{used / 8192:.2f}, {spec}cpu graph: False, gen throughput (token/s): "
            f"{opts.tps * rng.uniform(0.97, 1.03):.2f}, #queue-req: 0")
        profile_step()
    with LOCK:
        state["running"] -= 1


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--port", type=int, default=30000)
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--model-path", default="/models/tiny")
    p.add_argument("--speculative-algorithm", default=None)
    p.add_argument("--speculative-num-steps", type=int, default=None)
    # the speed comes from the environment (STANDIN_TPS), so that two arms of a plan can
    # differ in speed without differing in a server argument
    p.add_argument("--tps", type=float, default=float(os.environ.get("STANDIN_TPS", 700)))
    # (also STANDIN_DIE_DURING_LOAD=1: an arm that dies without differing in an argument)
    p.add_argument("--die-during-load", action="store_true",
                   default=os.environ.get("STANDIN_DIE_DURING_LOAD") == "1")
    p.add_argument("--hang", action="store_true")
    p.add_argument("--enable-metrics", action="store_true")  # serve /metrics
    p.add_argument("--disable-cuda-graph", action="store_true")  # accepted, changes nothing
    p.add_argument("--slow-start", type=float, default=0.0)
    p.add_argument("--ignore-sigint", action="store_true")
    p.add_argument("--die-after", type=int, default=0,
                   help="exit (as a crashed scheduler would) after this many requests")
    opts = p.parse_args()
    if opts.ignore_sigint:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, lambda *_: (say("SIGTERM received. Gracefully exiting."),
                                              os._exit(0)))
    say("Cuda graph is disabled because of using torch native attention backend")
    if opts.speculative_algorithm:
        say("Overlap schedule is not implemented for speculative decoding on CPU.")
        say("Max running requests is reset to 48 for speculative decoding. You can override "
            "this by explicitly setting --max-running-requests.")
        say("speculative_num_draft_tokens is set to 12 by default for ngram speculative "
            "decoding. You can override this by explicitly setting "
            "--speculative-num-draft-tokens.")
    say("server_args=" + repr(server_args(opts)))
    time.sleep(opts.slow_start)
    say("Load weight begin. avail mem=20.99 GB")
    if opts.die_during_load:
        say("Scheduler hit an exception: Traceback (most recent call last):")
        sys.stdout.write("RuntimeError: stand-in told to die during load\n")
        sys.stdout.flush()
        sys.exit(1)
    say("Load weight end. elapsed=0.07 s, type=LlamaForCausalLM, avail mem=20.99 GB, "
        "mem usage=0.00 GB.")
    say("KV Cache is allocated. dtype: torch.bfloat16, #tokens: 8192, K size: 0.00 GB, "
        "V size: 0.00 GB")
    say("Memory pool end. avail mem=20.94 GB")
    say(f"max_total_num_tokens=8192, chunked_prefill_size=4096, max_prefill_tokens=16384, "
        f"max_running_requests={48 if opts.speculative_algorithm else 2048}, "
        f"context_len=4096, available_cpu_mem=20.94 GB")
    Handler.opts = opts
    httpd = ThreadingHTTPServer((opts.host, opts.port), Handler)
    say(f"INFO:     Started server process [{os.getpid()}]")
    say(f"INFO:     Uvicorn running on http://{opts.host}:{opts.port} (Press CTRL+C to quit)")
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    if not opts.hang:
        say('INFO:     127.0.0.1:51608 - "GET /model_info HTTP/1.1" 200 OK')
        say("Prefill batch, #new-seq: 1, #new-token: 12, #cached-token: 0, token usage: 0.00, "
            "#running-req: 0, #queue-req: 0, #pending-token: 0, cpu graph: False, "
            "input throughput (token/s): 9.91")
        say('INFO:     127.0.0.1:51610 - "POST /generate HTTP/1.1" 200 OK')
        Handler.state["ready"] = True
        say("The server is fired up and ready to roll!")
    try:
        while True:
            time.sleep(0.2)
    except KeyboardInterrupt:
        say("INFO:     Shutting down")
        say(f"INFO:     Finished server process [{os.getpid()}]")
        httpd.shutdown()


if __name__ == "__main__":
    main()
