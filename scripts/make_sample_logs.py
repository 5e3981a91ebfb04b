"""Generate the realistic SGLang logs under ``sample_logs/`` (deterministic).

Every line follows a template of reference ``sglang_formats.md`` for its release; the
numbers are made up but shaped like real runs.  Run from the repository root:

    python scripts/make_sample_logs.py [OUT_DIR]

``tests/test_samples.py`` regenerates into a temporary folder and checks the committed
files are identical, so edit this script, never the logs.
"""

from __future__ import annotations

import json
import random
import sys
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from statistics import NormalDist
from typing import Any

# ---------------------------------------------------------------------------- helpers


@dataclass
class Era:
    """How one release prints (only what the generator needs)."""

    version: str
    stamp: str = "date"  # "time" (0.2.15-0.3.2), "date", "ms" (SGLANG_LOG_MS, 0.5.6+)
    ranks: str = " TP0"  # rank part of the scheduler prefix
    head: str = ". "  # ". " (<=0.5.3) or ", " (0.5.4+)
    fwd_iter: bool = False  # " [N]" after the head word (0.5.4+)
    trailing: bool = False  # line ends with ", "
    args_style: str = "repr"  # "repr" (<=0.5.21) or "dict" (0.5.22+)
    graph_label: str | None = None  # "cuda graph" etc. (0.4.7+ decode)
    prefill_graph: bool = False  # graph flag on prefill (0.5.9+)
    prefill_order: str = "none"  # "tp_then_graph" (0.5.9), "graph_then_tp" (0.5.10+)
    cache_hit_rate: bool = False  # prefill, <=0.4.3
    prefill_usage: bool = True  # prefill token usage (0.3.2+)
    pending_token: bool = False  # 0.5.11+
    accept_rate: bool = False  # 0.5.4+
    capture: str = "old"  # "old" (<=0.5.13) or "target" (0.5.14+)
    kv_dtype_first: bool = False  # "KV Cache is allocated. dtype: ..." (0.5.13+)
    uvicorn_ts: bool = True  # uvicorn lines carry SGLang's prefix (0.4.3+)
    pool: str = "plain"  # "plain", "swa", "mamba", "hisparse"
    suffix: str = ""  # extra fields after #queue-req (MFU, occupancy)
    extra_decode: str = ""  # inserted before the graph flag (PD fields)


def stamp(t: datetime, era: Era) -> str:
    if era.stamp == "time":
        return t.strftime("%H:%M:%S")
    if era.stamp == "ms":
        return t.strftime("%Y-%m-%d %H:%M:%S") + f".{t.microsecond // 1000:03d}"
    return t.strftime("%Y-%m-%d %H:%M:%S")


def sched(t: datetime, era: Era, msg: str) -> str:
    """A line of the scheduler process (rank prefix)."""
    return f"[{stamp(t, era)}{era.ranks}] {msg}"


def main_proc(t: datetime, era: Era, msg: str) -> str:
    """A line of the main (HTTP/tokenizer) process: no rank part."""
    return f"[{stamp(t, era)}] {msg}"


def server_args_text(args: dict[str, Any], style: str) -> str:
    if style == "dict":
        return "server_args=" + repr(args)
    return "server_args=ServerArgs(" + ", ".join(f"{k}={v!r}" for k, v in args.items()) + ")"


def base_args(model: str, **over: Any) -> dict[str, Any]:
    args: dict[str, Any] = {
        "model_path": model, "tokenizer_path": model, "tokenizer_mode": "auto",
        "skip_tokenizer_init": False, "load_format": "auto", "trust_remote_code": False,
        "dtype": "auto", "kv_cache_dtype": "auto", "quantization": None,
        "served_model_name": model, "chat_template": None, "host": "127.0.0.1", "port": 30000,
        "mem_fraction_static": 0.88, "max_running_requests": None, "max_total_tokens": None,
        "chunked_prefill_size": 8192, "max_prefill_tokens": 16384, "schedule_policy": "fcfs",
        "tp_size": 1, "dp_size": 1, "stream_interval": 1, "random_seed": 42,
        "log_level": "info", "decode_log_interval": 40, "api_key": None,
        "attention_backend": None, "disable_cuda_graph": False, "cuda_graph_max_bs": None,
        "enable_dp_attention": False, "ep_size": 1, "pp_size": 1,
        "speculative_algorithm": None, "speculative_draft_model_path": None,
        "speculative_num_steps": None, "speculative_eagle_topk": None,
        "speculative_num_draft_tokens": None,
    }
    args.update(over)
    return args


def f2(x: float) -> str:
    return f"{x:.2f}"


@dataclass
class Log:
    era: Era
    t: datetime
    rng: random.Random
    lines: list[str] = field(default_factory=list)
    iteration: int = 0

    def tick(self, seconds: float) -> None:
        self.t += timedelta(seconds=seconds)

    def s(self, msg: str) -> None:
        self.lines.append(sched(self.t, self.era, msg))

    def m(self, msg: str) -> None:
        self.lines.append(main_proc(self.t, self.era, msg))

    def raw(self, text: str) -> None:
        self.lines.append(text)

    def http(self, method: str, path: str, status: str = "200 OK") -> None:
        port = self.rng.randint(30000, 60000)
        text = f'INFO:     127.0.0.1:{port} - "{method} {path} HTTP/1.1" {status}'
        if self.era.uvicorn_ts:
            self.m(text)
        else:
            self.raw(text)

    def head(self, word: str) -> str:
        era = self.era
        self.iteration += 1
        it = f" [{self.iteration * 40}]" if era.fwd_iter else ""
        return f"{word} batch{it}{era.head}"

    def usage(self, tokens: int, usage: float) -> str:
        pool = self.era.pool
        if pool == "swa":
            return (f"#full token: {tokens}, full token usage: {f2(usage)}, "
                    f"#swa token: {tokens // 4}, swa token usage: {f2(usage / 4)}")
        if pool == "mamba":
            return (f"#full token: {tokens}, full token usage: {f2(usage)}, "
                    f"mamba num: {3}, mamba usage: {f2(0.02)}")
        if pool == "hisparse":
            return (f"#token: {tokens}, token usage: {f2(usage)}, #gpu token: {tokens // 2}, "
                    f"gpu token usage: {f2(usage / 2)}, #cpu token: {tokens // 2}, "
                    f"cpu token usage: {f2(usage / 8)}")
        return f"#token: {tokens}, token usage: {f2(usage)}"

    def end(self, body: str) -> str:
        body += self.era.suffix
        return body + (", " if self.era.trailing else "")

    def prefill(self, new_token: int, cached: int, running: int, queue: int, usage: float,
                tput: float, graph: bool = True, mixed: bool = False, hit: float = 0.0) -> None:
        era = self.era
        if mixed:
            head = f"Prefill batch(mixed #running-req: {running}). "
            fields = ["#new-seq: 1", f"#new-token: {new_token}", f"#cached-token: {cached}",
                      f"cache hit rate: {hit:.2f}%", f"#queue-req: {queue}"]
            self.s(head + ", ".join(fields))
            return
        fields = ["#new-seq: 1", f"#new-token: {new_token}", f"#cached-token: {cached}"]
        if era.cache_hit_rate:
            fields.append(f"cache hit rate: {hit:.2f}%")
        if era.prefill_usage:
            if era.pool == "swa":
                fields.append(f"full token usage: {f2(usage)}, swa token usage: {f2(usage / 4)}")
            elif era.pool == "mamba":
                fields.append(f"full token usage: {f2(usage)}, mamba usage: {f2(0.02)}")
            else:
                fields.append(f"token usage: {f2(usage)}")
        fields += [f"#running-req: {running}", f"#queue-req: {queue}"]
        label = era.graph_label or "cuda graph"
        if era.prefill_order == "tp_then_graph":
            fields += [f"input throughput (token/s): {f2(tput)}", f"{label}: {graph}"]
        elif era.prefill_order == "graph_then_tp":
            if era.pending_token:
                fields.append(f"#pending-token: {self.rng.randint(0, 64)}")
                if era.version == "0.5.23":
                    fields.append(f"#replay-token: {self.rng.randint(1, 8)}")
            fields += [f"{label}: {graph}", f"input throughput (token/s): {f2(tput)}"]
        self.s(self.end(self.head("Prefill") + ", ".join(fields)))

    def decode(self, running: int, tokens: int, usage: float, gen: float, queue: int = 0,
               graph: bool = True, accept: float | None = None, ndt: int = 3) -> None:
        era = self.era
        fields = [f"#running-req: {running}", self.usage(tokens, usage)]
        if accept is not None:
            fields.append(f"accept len: {f2(accept)}")
            if era.accept_rate:
                fields.append(f"accept rate: {f2((accept - 1) / (ndt - 1))}")
        if era.extra_decode:
            fields.append(era.extra_decode)
        if era.graph_label:
            fields.append(f"{era.graph_label}: {graph}")
        fields += [f"gen throughput (token/s): {f2(gen)}", f"#queue-req: {queue}"]
        self.s(self.end(self.head("Decode") + ", ".join(fields)))


# ------------------------------------------------------------------- run scenarios


def ver(era: Era) -> tuple[int, ...]:
    return tuple(int(x) for x in era.version.split("."))


def startup(log: Log, args: dict[str, Any], arch: str, tp: int = 1,
            spec: bool = False) -> None:
    """The startup lines of reference §3.2 as the era prints them."""
    era = log.era
    v = ver(era)
    log.m(server_args_text(args, era.args_style))
    log.tick(2.1)
    if tp > 1:
        log.s("Init torch distributed begin.")
        log.tick(0.8)
        log.s("sglang is using nccl==2.27.3")
        log.raw("node-1:8811:8811 [0] NCCL INFO Bootstrap : Using eth0:10.0.0.2<0>")
        log.raw("node-1:8811:8811 [0] NCCL INFO NCCL version 2.27.3+cuda12.8")
        log.s("Init torch distributed ends. mem usage=0.41 GB")
    log.s("Load weight begin. avail mem=78.54 GB")
    log.raw("Loading safetensors checkpoint shards: 100% Completed | 8/8 [00:12<00:00,  1.52s/it]")
    log.tick(13.4)
    if v <= (0, 4, 3):
        log.s(f"Load weight end. type={arch}, dtype=torch.bfloat16, avail mem=61.88 GB")
    else:
        log.s(f"Load weight end. type={arch}, dtype=torch.bfloat16, avail mem=61.88 GB, "
              f"mem usage=16.66 GB.")
    if era.kv_dtype_first:
        log.s("KV Cache is allocated. dtype: torch.bfloat16, #tokens: 421337, "
              "K size: 19.29 GB, V size: 19.29 GB")
    elif v >= (0, 4, 4):
        log.s("KV Cache is allocated. #tokens: 421337, K size: 19.29 GB, V size: 19.29 GB")
    log.s("Memory pool end. avail mem=22.31 GB")
    log.tick(0.4)
    if era.capture == "target":
        log.s("Capture target decode CUDA graph begin. backend=full, num_tokens_per_req=1, "
              "avail mem=21.80 GB")
        log.raw("Capturing batches (bs=1 avail_mem=21.50 GB): 100%|██████████| 36/36 "
                "[00:07<00:00,  4.81it/s]")
        log.tick(7.6)
        log.s("Capture target decode CUDA graph end. bs=[1, 2, 4, 8, 16, 24, 32], "
              "elapsed=7.61 s, mem usage=0.62 GB, avail mem=21.18 GB.")
    elif v <= (0, 4, 3):
        log.s("Capture cuda graph begin. This can take up to several minutes.")
        log.tick(7.6)
        log.s("Capture cuda graph end. Time elapsed: 7.61 s")
    else:
        log.s("Capture cuda graph begin. This can take up to several minutes. "
              "avail mem=21.80 GB")
        if v >= (0, 4, 7):
            log.s("Capture cuda graph bs [1, 2, 4, 8, 16, 24, 32]")
        log.tick(7.6)
        if v <= (0, 4, 7):
            log.s("Capture cuda graph end. Time elapsed: 7.61 s. avail mem=21.18 GB. "
                  "mem usage=0.62 GB.")
        else:
            log.s("Capture cuda graph end. Time elapsed: 7.61 s. mem usage=0.62 GB. "
                  "avail mem=21.18 GB.")
        if spec:
            log.s("Capture draft cuda graph begin. This can take up to several minutes. "
                  "avail mem=21.10 GB")
            log.tick(3.2)
            log.s("Capture draft cuda graph end. Time elapsed: 3.20 s. mem usage=0.31 GB. "
                  "avail mem=20.79 GB.")
    if v <= (0, 4, 2):
        log.s("max_total_num_tokens=421337, max_prefill_tokens=16384, max_running_requests=48, "
              "context_len=131072")
    elif v <= (0, 4, 6):
        log.s("max_total_num_tokens=421337, chunked_prefill_size=8192, "
              "max_prefill_tokens=16384, max_running_requests=48, context_len=131072")
    else:
        log.s("max_total_num_tokens=421337, chunked_prefill_size=8192, "
              "max_prefill_tokens=16384, max_running_requests=48, context_len=131072, "
              "available_gpu_mem=20.79 GB")
    log.m("INFO:     Started server process [8811]") if era.uvicorn_ts else \
        log.raw("INFO:     Started server process [8811]")
    log.m("INFO:     Uvicorn running on http://127.0.0.1:30000 (Press CTRL+C to quit)") \
        if era.uvicorn_ts else \
        log.raw("INFO:     Uvicorn running on http://127.0.0.1:30000 (Press CTRL+C to quit)")
    log.tick(1.0)
    log.http("GET", "/model_info" if v >= (0, 5, 7) else "/get_model_info")
    # Warm-up request: a tiny prefill that runs eagerly, then the ready line.
    log.prefill(new_token=1, cached=0, running=0, queue=0, usage=0.0, tput=0.05, graph=False)
    log.tick(0.6)
    log.http("POST", "/generate")
    log.m("The server is fired up and ready to roll!")


def spread(rng: random.Random, n: int) -> list[float]:
    """``n`` standard-normal quantiles in random order: a sample whose median is exactly 0,
    so each run's steady median is exactly the throughput it was generated with."""
    z = [NormalDist().inv_cdf((i + 0.5) / n) for i in range(n)]
    rng.shuffle(z)
    return z


def workload(log: Log, requests: int, lines_per_req: int, tps: float, noise: float,
             accept: tuple[float, float] | None = None, concurrency: int = 1,
             first_eager: bool = True) -> None:
    rng = log.rng
    zs = iter(spread(rng, requests * (lines_per_req - 1)))
    tokens = 0
    for r in range(requests):
        log.tick(rng.uniform(2.0, 6.0))  # idle gap before the request
        if r % 3 == 0:
            log.http("GET", "/health")
        prompt = rng.randint(600, 2400)
        cached = rng.choice([0, 0, 512])
        log.prefill(new_token=prompt - cached, cached=cached, running=concurrency - 1, queue=0,
                    usage=0.01, tput=prompt / 0.35, hit=cached / prompt * 100)
        tokens = prompt
        for i in range(lines_per_req):
            graph = True
            if i == 0:
                # the window includes the idle gap and the prefill
                z = rng.uniform(-1, 1)
                gen = (tps + noise * z) * 0.4
                if r == 0 and first_eager:
                    graph, gen = False, 0.05
            else:
                z = next(zs)
                gen = tps + noise * z
            # accept length moves with throughput (the same z): more accepted tokens per
            # verify step is what makes a speculative window fast
            al = None if accept is None else min(3.0, max(1.0, accept[0] + accept[1] * z))
            step = 40 * concurrency / max(gen, 1.0)
            log.tick(min(step, 30.0))
            tokens += 40
            log.decode(running=concurrency, tokens=tokens * concurrency,
                       usage=min(0.99, tokens * concurrency / 421337), gen=gen, graph=graph,
                       accept=al)
        log.http("POST", "/v1/chat/completions")


def shutdown(log: Log) -> None:
    log.tick(3.0)
    for text in ("INFO:     Shutting down", "INFO:     Application shutdown complete.",
                 "INFO:     Finished server process [8811]"):
        log.m(text) if log.era.uvicorn_ts else log.raw(text)


# ------------------------------------------------------------------------- eras

ERAS: dict[str, Era] = {
    "0.2.15": Era("0.2.15", stamp="time", cache_hit_rate=True, prefill_usage=False,
                  uvicorn_ts=False),
    "0.3.6": Era("0.3.6", cache_hit_rate=True, uvicorn_ts=False),
    "0.4.5": Era("0.4.5", trailing=True),
    "0.4.7": Era("0.4.7", ranks="", graph_label="cuda graph"),
    "0.5.1": Era("0.5.1", ranks=" DP1 TP1 EP1", trailing=True, graph_label="cuda graph",
                 pool="swa", extra_decode="pre-allocated usage: 0.00, #retracted-req: 0"),
    "0.5.5": Era("0.5.5", head=", ", fwd_iter=True, trailing=True, graph_label="cuda graph",
                 accept_rate=True),
    "0.5.10": Era("0.5.10", head=", ", graph_label="cuda graph", prefill_graph=True,
                  prefill_order="graph_then_tp", accept_rate=True, pool="mamba",
                  suffix=", est. decode TFLOPS/s (per GPU): 41.20, est. read BW (GB/s per GPU): "
                         "1520.33, est. write BW (GB/s per GPU): 12.08"),
    "0.5.16": Era("0.5.16", stamp="ms", ranks=" DP1 PP1 ATTN_CP0 MOE_DP0 TP12 EP12", head=", ",
                  fwd_iter=True, graph_label="npu graph", prefill_graph=True,
                  prefill_order="graph_then_tp", pending_token=True, accept_rate=True,
                  capture="target", kv_dtype_first=True, pool="hisparse",
                  suffix=", fwd occupancy: 91.20%"),
    "0.5.23": Era("0.5.23", stamp="ms", head=", ", fwd_iter=True, args_style="dict",
                  graph_label="cuda graph", prefill_graph=True, prefill_order="graph_then_tp",
                  pending_token=True, accept_rate=True, capture="target", kv_dtype_first=True,
                  suffix=", fwd+idle occupancy: 87.45%"),
}


SPEC_ERAS = ("0.4.5", "0.5.5")


def era_log(version: str, seed: int) -> list[str]:
    """One launch of ``version``; for :data:`SPEC_ERAS` a baseline launch followed by an
    EAGLE launch of the same server in the same log (one manifest covers both)."""
    era = ERAS[version]
    start = datetime(2026, 3, 1, 23, 59, 10) if era.stamp == "time" else \
        datetime(2026, 3, 1, 10, 0, 0, 120000)
    if version not in SPEC_ERAS:
        return era_run(version, seed, start, spec=False)
    first = era_run(version, seed, start, spec=False)
    return first + era_run(version, seed + 50, start + timedelta(minutes=5), spec=True)


def era_run(version: str, seed: int, start: datetime, spec: bool) -> list[str]:
    era = ERAS[version]
    rng = random.Random(seed)
    log = Log(era, start, rng)
    over: dict[str, Any] = {}
    if spec:
        over = dict(speculative_algorithm="EAGLE", speculative_draft_model_path="draft/eagle",
                    speculative_num_steps=2, speculative_eagle_topk=1,
                    speculative_num_draft_tokens=3)
    if version == "0.5.1":
        over.update(tp_size=2, dp_size=2, ep_size=2, enable_dp_attention=True)
    if version == "0.5.16":
        over.update(tp_size=16, dp_size=2, ep_size=16, pp_size=2)
    startup(log, base_args("Qwen/Qwen3-8B", **over), "Qwen3ForCausalLM", spec=spec)
    if version == "0.2.15":
        log.prefill(new_token=40, cached=600, running=1, queue=0, usage=0.0, tput=0.0,
                    mixed=True, hit=93.75)
    workload(log, requests=4, lines_per_req=6, tps=150.0 if spec else 80.0, noise=2.0,
             accept=(2.4, 0.1) if spec else None)
    if version == "0.4.7":
        log.s("Scheduler hit an exception: Traceback (most recent call last):")
        log.raw('  File "/sgl-workspace/sglang/python/sglang/srt/managers/scheduler.py", '
                'line 1785, in run_scheduler_process')
        log.raw("    scheduler.event_loop_overlap()")
        log.raw("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.")
        log.m("Received sigquit from a child process. It usually means the child failed.")
    shutdown(log)
    return log.lines


def era_manifest(version: str) -> dict[str, Any]:
    """A manifest for an era sample: one GPU, that SGLang release."""
    return {
        "logpipe_manifest": 1,
        "captured_at": "2026-03-01T09:58:00+00:00",
        "env": {"CUDA_VISIBLE_DEVICES": "0"},
        "gpu": {"available": True, "cuda_version": "12.4",
                "devices": [{"name": "NVIDIA H100 80GB HBM3", "memory_mib": 81559,
                             "driver": "550.90.07", "uuid": "GPU-0d7f3b2e"}]},
        "packages": {"sglang": version, "torch": "2.5.1"},
        "host": {"name": "dev-box-3"},
    }


# ------------------------------------------------------------------------ mission

MISSION_MODEL = "Qwen/Qwen3-235B-A22B-Instruct-2507"
MISSION_ERA = Era("0.5.12", ranks=" TP0 EP0", head=", ", graph_label="cuda graph",
                  prefill_graph=True, prefill_order="graph_then_tp", pending_token=True,
                  accept_rate=True)


def mission_log(tps: float, noise: float, seed: int, start: datetime,
                accept: tuple[float, float] | None = None,
                model: str = MISSION_MODEL, steps: int = 2) -> list[str]:
    rng = random.Random(seed)
    log = Log(MISSION_ERA, start, rng)
    over: dict[str, Any] = dict(tp_size=8, ep_size=8, mem_fraction_static=0.85,
                                cuda_graph_max_bs=32)
    if accept:
        over.update(speculative_algorithm="EAGLE3",
                    speculative_draft_model_path=draft_of(model),
                    speculative_num_steps=steps, speculative_eagle_topk=1,
                    speculative_num_draft_tokens=steps + 1, max_running_requests=48)
        log.raw("Max running requests is reset to 48 for speculative decoding. You can override "
                "this by explicitly setting --max-running-requests.")
    startup(log, base_args(model, **over), "Qwen3MoeForCausalLM", tp=8,
            spec=accept is not None)
    workload(log, requests=8, lines_per_req=12, tps=tps, noise=noise, accept=accept)
    shutdown(log)
    return log.lines


SWEEP = {1: (70.5, 1.72), 2: (75.9, 2.1), 3: (73.2, 2.34), 4: (69.8, 2.5), 5: (66.1, 2.6),
         6: (62.4, 2.66)}
TUNED_NCCL = {"NCCL_PROTO": "LL", "NCCL_ALGO": "Ring", "NCCL_P2P_LEVEL": "SYS"}


def draft_of(model: str) -> str:
    return "lmsys/" + model.split("/")[-1].replace("-Instruct-2507", "") + "-EAGLE3"


def mission_manifest(tuned: bool, spec: bool, captured_at: str,
                     model: str = MISSION_MODEL, steps: int = 2) -> dict[str, Any]:
    """What `logpipe env capture` records on the GPU host before each launch."""
    env = {"CUDA_VISIBLE_DEVICES": "0,1,2,3,4,5,6,7", "NCCL_DEBUG": "INFO",
           "NCCL_IB_DISABLE": "1", "SGLANG_ENABLE_JIT_DEEPGEMM": "1",
           "PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True", "HF_TOKEN": "<redacted>"}
    if tuned:
        env.update(TUNED_NCCL)
    command = ["python", "-m", "sglang.launch_server", "--model-path", model,
               "--tp", "8", "--ep-size", "8", "--mem-fraction-static", "0.85",
               "--cuda-graph-max-bs", "32", "--host", "127.0.0.1", "--port", "30000"]
    launch = {"model_path": model, "tp_size": "8", "ep_size": "8",
              "mem_fraction_static": "0.85", "cuda_graph_max_bs": "32", "host": "127.0.0.1",
              "port": "30000"}
    if spec:
        command += ["--speculative-algorithm", "EAGLE3", "--speculative-draft-model-path",
                    draft_of(model), "--speculative-num-steps", str(steps),
                    "--speculative-eagle-topk", "1", "--speculative-num-draft-tokens",
                    str(steps + 1)]
        launch.update(speculative_algorithm="EAGLE3",
                      speculative_draft_model_path=draft_of(model),
                      speculative_num_steps=str(steps), speculative_eagle_topk="1",
                      speculative_num_draft_tokens=str(steps + 1))
    device = {"name": "NVIDIA H200", "memory_mib": 143771, "driver": "570.133.20"}
    return {
        "logpipe_manifest": 1,
        "captured_at": captured_at,
        "env": dict(sorted(env.items())),
        "gpu": {"available": True, "cuda_version": "12.8",
                "devices": [dict(device, uuid=f"GPU-5e1d0c4a-0000-4000-8000-00000000000{i}")
                            for i in range(8)]},
        "packages": {"sglang": "0.5.12", "sgl-kernel": "0.3.21", "flashinfer-python": "0.6.2",
                     "torch": "2.9.1", "triton": "3.5.1", "nvidia-nccl-cu12": "2.27.3"},
        "host": {"name": "gpu-node-07", "cpu": "AMD EPYC 9654 96-Core Processor",
                 "kernel": "6.8.0-60-generic", "os": "Linux-6.8.0-60-generic-x86_64-with-glibc2.39",
                 "python": "3.12.3"},
        "command": " ".join(command),
        "launch_args": launch,
    }


# ------------------------------------------------------------------------ wrappers

def wrapper_base() -> tuple[Era, list[tuple[datetime, str, bool]]]:
    """(time, message, is_scheduler) records of a short 0.5.12 run with ms stamps."""
    era = Era("0.5.12", stamp="ms", head=", ", graph_label="cuda graph", prefill_graph=True,
              prefill_order="graph_then_tp", pending_token=True, accept_rate=True)
    log = Log(era, datetime(2026, 6, 7, 10, 59, 31, 659000), random.Random(7))
    startup(log, base_args("Qwen/Qwen3-8B"), "Qwen3ForCausalLM")
    workload(log, requests=2, lines_per_req=4, tps=120.0, noise=3.0)
    return era, _records(log.lines)


def _records(lines: list[str]) -> list[tuple[datetime | None, str, str]]:
    out = []
    for line in lines:
        if line.startswith("["):
            close = line.index("] ")
            inner, msg = line[1:close], line[close + 2:]
            parts = inner.split(" ")
            t = datetime.strptime(" ".join(parts[:2]), "%Y-%m-%d %H:%M:%S.%f")
            out.append((t, " ".join(parts[2:]), msg))
        else:
            out.append((None, "", line))
    return out


def wrapped(style: str) -> list[str]:
    _, recs = wrapper_base()
    out = []
    for t, ranks, msg in recs:
        if t is None:
            out.append(msg)
            continue
        bracket = f"[{t.strftime('%Y-%m-%d %H:%M:%S')}.{t.microsecond // 1000:03d}" + \
                  (f" {ranks}" if ranks else "") + f"] {msg}"
        ms = f"{t.microsecond // 1000:03d}"
        if style == "plain":
            out.append(bracket)
        elif style == "ray":
            out.append(f"\x1b[36m(SGLangEngine pid=4242, ip=10.0.0.2)\x1b[0m {bracket}")
        elif style == "ray-local":
            out.append(f"(SchedulerActor pid=4242) {bracket}")
        elif style == "docker-timestamps":
            utc = t - timedelta(hours=2)
            out.append(utc.strftime("%Y-%m-%dT%H:%M:%S.") + f"{t.microsecond:06d}481Z {bracket}")
        elif style == "docker-desktop":
            out.append(t.strftime("%Y-%m-%d %H:%M:%S.") + f"{ms} {bracket}")
        elif style == "kubectl-indented":
            out.append("    " + bracket)
        elif style == "pylogging-brackets":
            logger = ("sglang.srt.managers.scheduler" if ranks
                      else "sglang.srt.entrypoints.http_server")
            out.append(t.strftime("%Y-%m-%d %H:%M:%S,") + f"{ms} [INFO] {logger}: {msg}")
        elif style == "pylogging-pid":
            out.append(t.strftime("%Y-%m-%d %H:%M:%S") + f",{ms} INFO 151972 "
                       f"[scheduler_metrics_mixin.py:287] {msg}")
        elif style == "no-timestamp":
            out.append(msg)
        elif style == "crlf":
            out.append(bracket + "\r")
        else:
            raise ValueError(style)
    return out


WRAPPERS = ("plain", "ray", "ray-local", "docker-timestamps", "docker-desktop",
            "kubectl-indented", "pylogging-brackets", "pylogging-pid", "no-timestamp", "crlf")


# ------------------------------------------------------------------------ benchmarks

def bench_record(era: str, output_tps: float, tpot_ms: float, accept: float | None = None,
                 concurrency: int = 1, prompts: int = 8) -> dict[str, Any]:
    """One bench_serving JSONL record with the keys of ``era`` (reference §5.1)."""
    out_tokens = prompts * 1024
    duration = out_tokens / output_tps
    e2e = duration / prompts * 1000
    ttft = e2e - tpot_ms * 1023
    rec: dict[str, Any] = {
        "backend": "sglang", "dataset_name": "random", "request_rate": float("inf"),
    }
    if era == "0.2.15":
        rec.update(total_input_tokens=prompts * 1024, total_output_tokens=out_tokens,
                   total_output_tokens_retokenized=out_tokens, mean_e2e_latency_ms=e2e,
                   median_e2e_latency_ms=e2e, median_ttft_ms=ttft, median_itl_ms=tpot_ms,
                   output_throughput=output_tps, sharegpt_output_len=None,
                   random_input_len=1024, random_output_len=1024, random_range_ratio=0.0,
                   duration=duration, completed=prompts)
        rec["request_rate"] = 128.0
        return rec
    rec.update(max_concurrency=concurrency, sharegpt_output_len=None, random_input_len=1024,
               random_output_len=1024, random_range_ratio=0.0, duration=duration,
               completed=prompts, total_input_tokens=prompts * 1024,
               total_output_tokens=out_tokens, total_output_tokens_retokenized=out_tokens,
               request_throughput=prompts / duration,
               input_throughput=prompts * 1024 / duration, output_throughput=output_tps)
    for name, value in (("e2e_latency", e2e), ("ttft", ttft), ("tpot", tpot_ms),
                        ("itl", tpot_ms)):
        rec.update({f"mean_{name}_ms": value * 1.01, f"median_{name}_ms": value,
                    f"std_{name}_ms": value * 0.05, f"p99_{name}_ms": value * 1.3})
    rec.update(concurrency=float(concurrency), p95_itl_ms=tpot_ms * 1.2,
               accept_length=accept)
    if era == "0.4.5":
        return rec
    rec.update(total_input_text_tokens=prompts * 1024, total_input_vision_tokens=0,
               tag=None, total_throughput=(prompts * 2048) / duration,
               max_output_tokens_per_s=output_tps * 1.1, max_concurrent_requests=concurrency,
               p90_e2e_latency_ms=e2e * 1.1)
    rec["server_info"] = {"version": era, "model_path": MISSION_MODEL, "tp_size": 8,
                          "ep_size": 8, "api_key": None,
                          "internal_states": [{"avg_spec_accept_length": accept,
                                               "last_gen_throughput": output_tps}]}
    return rec


def bench_console(rec: dict[str, Any]) -> str:
    """The console summary bench_serving prints for ``rec`` (0.5.x layout)."""
    def row(label: str, value: Any) -> str:
        text = f"{value:.2f}" if isinstance(value, float) else str(value)
        return f"{label:<40} {text:<10}"

    lines = ["#Input tokens: 8192", "#Output tokens: 8192",
             "{:=^50}".format(" Serving Benchmark Result "),
             row("Backend:", rec["backend"]),
             row("Traffic request rate:", "inf"),
             row("Max request concurrency:", rec["max_concurrency"]),
             row("Successful requests:", rec["completed"]),
             row("Benchmark duration (s):", rec["duration"]),
             row("Total input tokens:", rec["total_input_tokens"]),
             row("Total generated tokens:", rec["total_output_tokens"]),
             row("Request throughput (req/s):", rec["request_throughput"]),
             row("Input token throughput (tok/s):", rec["input_throughput"]),
             row("Output token throughput (tok/s):", rec["output_throughput"]),
             row("Total token throughput (tok/s):", rec["total_throughput"]),
             row("Concurrency:", rec["concurrency"]),
             row("Accept length:", rec["accept_length"]),
             "{s:{c}^{n}}".format(s="End-to-End Latency", n=50, c="-"),
             row("Mean E2E Latency (ms):", rec["mean_e2e_latency_ms"]),
             row("Median E2E Latency (ms):", rec["median_e2e_latency_ms"]),
             "{s:{c}^{n}}".format(s="Time to First Token", n=50, c="-"),
             row("Mean TTFT (ms):", rec["mean_ttft_ms"]),
             row("Median TTFT (ms):", rec["median_ttft_ms"]),
             row("P99 TTFT (ms):", rec["p99_ttft_ms"]),
             "{s:{c}^{n}}".format(s="Time per Output Token (excl. 1st token)", n=50, c="-"),
             row("Mean TPOT (ms):", rec["mean_tpot_ms"]),
             row("Median TPOT (ms):", rec["median_tpot_ms"]),
             row("P99 TPOT (ms):", rec["p99_tpot_ms"]),
             "{s:{c}^{n}}".format(s="Inter-Token Latency", n=50, c="-"),
             row("Mean ITL (ms):", rec["mean_itl_ms"]),
             row("Median ITL (ms):", rec["median_itl_ms"]),
             row("P99 ITL (ms):", rec["p99_itl_ms"]),
             "=" * 50]
    return "\n".join(lines) + "\n"


def request_metrics_export(tps: float, seed: int, requests: int = 8) -> str:
    """What --export-metrics-to-file writes: request parameters (a JSON string) merged
    with meta_info, one line per finished request."""
    rng = random.Random(seed)
    lines = []
    for i in range(requests):
        prompt = rng.randint(600, 2400)
        params = {"rid": f"req-{i:04d}", "text": "(prompt text: never stored)",
                  "sampling_params": {"max_new_tokens": 480, "temperature": 0.0},
                  "stream": True}
        lines.append(json.dumps({
            "request_parameters": json.dumps(params), "id": f"req-{i:04d}",
            "finish_reason": {"type": "length", "length": 480},
            "prompt_tokens": prompt, "completion_tokens": 480,
            "cached_tokens": rng.choice([0, 0, 512]), "e2e_latency": round(
                480 / tps + rng.uniform(0.2, 0.5), 4),
            "response_sent_to_client_ts": 1777885200.0 + i * 10}))
    return "\n".join(lines) + "\n"


# ------------------------------------------------------------------------ profiles

def phase_dump(tps: float, synchronized: bool, seed: int, start: datetime,
               cycles: int = 200) -> str:
    """Phase timings of EAGLE-3 cycles: verify ≈ 90% of the cycle, draft ≈ 7%."""
    rng = random.Random(seed)
    accepted = [2, 2, 3, 2, 1, 2, 3, 2, 2, 2]  # mean 2.1
    shares = {"draft": 0.072, "verify": 0.898, "draft_extend": 0.02, "other": 0.01}
    t = start.replace(tzinfo=UTC).timestamp()  # the samples' clocks are UTC, wherever made
    lines = []
    for i in range(cycles):
        acc = accepted[i % len(accepted)]
        cycle = 2.1 / tps * 1000 * rng.uniform(0.97, 1.03)
        t += cycle / 1000
        lines.append(json.dumps({
            "v": 1, "ts": round(t, 4), "batch_size": 1,
            "phases_ms": {k: round(cycle * f, 4) for k, f in shares.items()},
            "accepted_tokens": acc, "synchronized": synchronized}))
    return "\n".join(lines) + "\n"


VERIFY_FIXED_MS, VERIFY_PER_TOKEN_MS = 22.5, (28.7 - 25.6) / 3
"""The mission's verify cost: 25.6 ms at 3 draft tokens, 28.7 ms at 6 (a fixed overhead)."""


def sweep_phase_dump(steps: int, tps: float, accept: float, seed: int, start: datetime,
                     cycles: int = 200) -> str | None:
    """Phase timings of one step-sweep launch: verify costs the mission's fixed +
    per-token line at ``steps + 1`` draft tokens, the cycle is what the launch's measured
    throughput and accept length imply, and the draft takes the rest.  None where the
    cycle is shorter than that verify (the 1-step launch: 24.4 ms against 24.6 + 0.8 ms),
    which was not profiled."""
    rng = random.Random(seed)
    cycle = accept / tps * 1000
    verify = VERIFY_FIXED_MS + VERIFY_PER_TOKEN_MS * (steps + 1)
    extend, other = 0.55, 0.28
    draft = cycle - verify - extend - other
    if draft <= 0:
        return None
    high = round((accept - int(accept)) * cycles)  # cycles that accept one token more
    t = start.replace(tzinfo=UTC).timestamp()
    lines = []
    for i in range(cycles):
        jitter = rng.uniform(0.98, 1.02)
        t += cycle * jitter / 1000
        lines.append(json.dumps({
            "v": 1, "ts": round(t, 4), "batch_size": 1,
            "phases_ms": {"draft": round(draft * jitter, 4), "verify": round(verify * jitter, 4),
                          "draft_extend": round(extend * jitter, 4),
                          "other": round(other * jitter, 4)},
            "accepted_tokens": int(accept) + (1 if (i * high) % cycles < high else 0),
            "synchronized": False}))
    return "\n".join(lines) + "\n"


TRACE_PROFILE_ID = "1777885800.5"
"""Profile id of the recorded traces under sample_logs/traces/ (see make_torch_traces.py)."""


def profiled_log(start: datetime, seed: int) -> list[str]:
    """A one-GPU server whose torch profiler ran for a while (``/start_profile``): the
    profile id in its log names the recorded trace next to it."""
    log = Log(MISSION_ERA, start, random.Random(seed))
    startup(log, base_args(MISSION_MODEL, tp_size=1, mem_fraction_static=0.85),
            "Qwen3MoeForCausalLM", tp=1)
    workload(log, requests=3, lines_per_req=8, tps=71.0, noise=0.8)
    log.s("Profiling starts. Traces will be saved to: /tmp/sglang-traces "
          f"(with profile id: {TRACE_PROFILE_ID})")
    workload(log, requests=1, lines_per_req=4, tps=31.0, noise=0.5)
    log.s("Stop profiling...")
    log.s("Profiling done. Traces are saved to: /tmp/sglang-traces")
    workload(log, requests=3, lines_per_req=8, tps=71.0, noise=0.8)
    shutdown(log)
    return log.lines


# --------------------------------------------------------------------------- write

def generate(out: Path) -> list[Path]:
    files: dict[str, bytes] = {}

    def put(rel: str, lines: list[str]) -> None:
        files[rel] = ("\n".join(lines) + "\n").encode()

    for i, version in enumerate(ERAS):
        put(f"eras/v{version}.log", era_log(version, seed=100 + i))
    for version in SPEC_ERAS:
        files[f"eras/v{version}.log.env.json"] = (
            json.dumps(era_manifest(version), indent=2) + "\n").encode()
    put("mission/baseline-untuned/server.log",
        mission_log(62.9, 0.7, seed=1, start=datetime(2026, 5, 4, 9, 0, 0)))
    put("mission/baseline-tuned/server.log",
        mission_log(90.0, 0.9, seed=2, start=datetime(2026, 5, 4, 11, 0, 0)))
    put("mission/eagle3-untuned/server.log",
        mission_log(75.9, 1.1, seed=3, start=datetime(2026, 5, 4, 13, 0, 0),
                    accept=(2.1, 0.08)))
    for run, tuned, spec, at in (("baseline-untuned", False, False, "2026-05-04T08:58:40+00:00"),
                                 ("baseline-tuned", True, False, "2026-05-04T10:58:40+00:00"),
                                 ("eagle3-untuned", False, True, "2026-05-04T12:58:40+00:00")):
        files[f"mission/{run}/env.json"] = (
            json.dumps(mission_manifest(tuned, spec, at), indent=2) + "\n").encode()
    # benchmarks: JSONL of three eras, and a console capture
    files["mission/baseline-untuned/bench_serving.jsonl"] = (json.dumps(
        bench_record("0.5.12", 61.2, 1000 / 62.9)) + "\n").encode()
    files["mission/eagle3-untuned/bench_serving.txt"] = bench_console(
        bench_record("0.5.12", 73.8, 1000 / 75.9, accept=2.1)).encode()
    files["eras/bench_serving_v0.2.15.jsonl"] = "".join(
        json.dumps(bench_record("0.2.15", 80.0 - i, 12.5)) + "\n" for i in range(2)).encode()
    files["eras/bench_serving_v0.4.5.jsonl"] = (json.dumps(
        bench_record("0.4.5", 140.0, 6.7, accept=2.4)) + "\n").encode()
    files["mission/baseline-untuned/sglang-request-metrics-20260504_09.log"] = \
        request_metrics_export(62.9, seed=70).encode()
    # the mission's profiling trap: the same EAGLE-3 launch timed with device
    # synchronisation at every phase boundary ran at 33 tok/s instead of 75.9
    start = datetime(2026, 5, 4, 15, 0, 0)
    put("profiles/eagle3-profiled/server.log",
        mission_log(33.0, 0.8, seed=60, start=start, accept=(2.1, 0.08)))
    files["profiles/eagle3-profiled/env.json"] = (json.dumps(
        mission_manifest(False, True, "2026-05-04T14:58:40+00:00"), indent=2) + "\n").encode()
    files["profiles/eagle3-profiled/phase_timings.jsonl"] = phase_dump(
        33.0, True, seed=61, start=start + timedelta(seconds=40)).encode()
    # next to a recorded H200 trace (not generated: scripts/make_torch_traces.py)
    put("traces/h200-decode/server.log", profiled_log(datetime(2026, 11, 29, 10, 44, 15), 63))
    files["mission/eagle3-untuned/phase_timings.jsonl"] = phase_dump(
        75.9, False, seed=62, start=datetime(2026, 5, 4, 13, 0, 40)).encode()
    # the mission's trap on a second model: its only baseline was measured tuned
    small = "Qwen/Qwen3-30B-A3B-Instruct-2507"
    put("unpaired/qwen3-30b-baseline-tuned/server.log",
        mission_log(140.0, 1.5, seed=21, start=datetime(2026, 5, 5, 9, 0, 0), model=small))
    put("unpaired/qwen3-30b-eagle3-untuned/server.log",
        mission_log(160.0, 2.0, seed=22, start=datetime(2026, 5, 5, 11, 0, 0),
                    accept=(2.3, 0.08), model=small))
    for run, tuned, spec, at in (
            ("qwen3-30b-baseline-tuned", True, False, "2026-05-05T08:58:40+00:00"),
            ("qwen3-30b-eagle3-untuned", False, True, "2026-05-05T10:58:40+00:00")):
        files[f"unpaired/{run}/env.json"] = (
            json.dumps(mission_manifest(tuned, spec, at, model=small), indent=2)
            + "\n").encode()
    # a sweep of speculative_num_steps in the untuned environment: accept length rises
    # with more steps, but verify cost grows faster; throughput peaks at 2 steps
    for steps, (tps, al) in SWEEP.items():
        start = datetime(2026, 5, 6, 8, 0, 0) + timedelta(hours=steps)
        put(f"sweep/eagle3-steps{steps}/server.log",
            mission_log(tps, 1.1, seed=40 + steps, start=start, accept=(al, 0.08), steps=steps))
        files[f"sweep/eagle3-steps{steps}/env.json"] = (json.dumps(mission_manifest(
            False, True, (start - timedelta(minutes=1)).isoformat() + "+00:00", steps=steps),
            indent=2) + "\n").encode()
        dump = sweep_phase_dump(steps, tps, al, seed=80 + steps,
                                start=start + timedelta(seconds=40))
        if dump is not None:
            files[f"sweep/eagle3-steps{steps}/phase_timings.jsonl"] = dump.encode()
    for style in WRAPPERS:
        put(f"wrappers/{style}.log", wrapped(style))
    restarts = era_log("0.4.7", seed=300)[:-1] + era_log("0.4.7", seed=301)
    put("restarts/server.log", restarts)
    damaged = era_log("0.4.7", seed=400)[:40]
    damaged.insert(30, "[2026-03-01 10:01:02] Decode batch. #running-req: 1O, "
                       "#token: 900, token usage: 0.00, cuda graph: True, "
                       "gen throughput (token/s): 80.10, #queue-req: 0")
    damaged.insert(31, "[2026-03-01 10:01:03] Decode batch. #running-req 1, #token: 940")
    files["damaged/server.log"] = ("\n".join(damaged[:33]) + "\n").encode() + \
        b"\xff\xfe\x00binary\x00junk\n" + ("\n".join(damaged[33:]) + "\n").encode()
    written = []
    for rel, data in files.items():
        path = out / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        written.append(path)
    return written


if __name__ == "__main__":
    target = Path(sys.argv[1]) if len(sys.argv) > 1 else Path("sample_logs")
    for p in generate(target):
        print(p)
