"""SGLang: its server log (every release since 0.2), read by :mod:`.logparser` with the
parser of :mod:`.parser` (batch lines, events, HTTP access lines, embedded records) and
the C fast lane; its format eras (:mod:`.era`) and ``server_args`` (:mod:`.server_args`).
"""

from __future__ import annotations

from logpipe.engines import CapacityRules, CounterRules, Engine, ServerRules
from logpipe.engines.sglang.kind import SOURCE

NAME = "sglang"

CAPACITY = CapacityRules(
    measures={
        "max_running_requests": "running",
        "max_queued_requests": "queued",
        "cuda_graph_max_bs": "batch",
        "cuda_graph_bs": "batch",
        "cuda_graph_config": "batch",
        "cuda_graph_max_bs_decode": "batch",
        "cuda_graph_bs_decode": "batch",
        "torch_compile_max_bs": "batch",
        "chunked_prefill_size": "prefill",
        "max_prefill_tokens": "prefill",
        "max_total_tokens": "kv",
        "mem_fraction_static": "kv",
    },
    # the effective value its capacity line prints, where the argument was left auto
    effective={"max_running_requests": "max_running_requests",
               "chunked_prefill_size": "chunked_prefill_size",
               "max_prefill_tokens": "max_prefill_tokens",
               "max_total_tokens": "max_total_num_tokens"},
    # what SGLang derives by itself when speculative decoding is on (reference §4)
    derived_by_speculation=frozenset({
        "max_running_requests", "cuda_graph_max_bs", "cuda_graph_bs", "cuda_graph_config",
        "cuda_graph_max_bs_decode", "cuda_graph_bs_decode", "mem_fraction_static"}),
    # variables SGLang sets itself at launch (reference §7), by release
    forced_variables=(
        ("CUDA_DEVICE_MAX_CONNECTIONS", "0.3.4", "0.5.4", "4"),
        ("CUDA_DEVICE_MAX_CONNECTIONS", "0.5.5", None, "8"),
        ("NCCL_CUMEM_ENABLE", "0.2.15", "0.4.10", "0"),
        ("NCCL_NVLS_ENABLE", "0.2.15", "0.4.1", "0"),
        ("TORCH_NCCL_AVOID_RECORD_STREAMS", "0.2.15", "0.4.10", "1"),
        ("CUDA_MODULE_LOADING", "0.4.4", "0.5.18", "AUTO"),
    ),
)

SERVER = ServerRules(
    decode_line="Decode batch",
    running=r"#running-req: (\d+)",
    profile_endpoint="/start_profile",
    profile_done_line="Profiling done",
    info_endpoints=("/server_info", "/get_server_info"),
    metrics_hint="SGLang serves /metrics only when started with --enable-metrics",
)

COUNTERS = CounterRules(
    prefix="sglang:",
    names={
        "sglang:generation_tokens": "generated_tokens",
        "sglang:prompt_tokens": "prompt_tokens",
        "sglang:num_requests": "requests",
        "sglang:spec_verify_calls": "spec_drafts",  # 0.5.x: verify steps of finished requests
        "sglang:time_to_first_token_seconds": "ttft_seconds",
        "sglang:inter_token_latency_seconds": "itl_seconds",  # 0.4.6+
        "sglang:time_per_output_token_seconds": "itl_seconds",  # its name before 0.4.6
        "sglang:request_time_per_output_token_seconds": "tpot_seconds",
        "sglang:e2e_request_latency_seconds": "e2e_seconds",
        "sglang:queue_time_seconds": "queue_seconds",
    },
    # SGLang's own per-request figure: completion tokens / verify steps
    accept_length="generated",
)

ENGINE = Engine(
    name=NAME,
    display="SGLang",
    log_kinds=(SOURCE,),
    log_parser="logpipe.engines.sglang.logparser:make_parser",
    log_files_parser="logpipe.engines.sglang.logparser:parse_files",
    packages=("sglang", "sglang-kernel", "sgl-kernel"),
    env_prefixes=("SGLANG_", "SGL_"),
    phase_hook="logpipe.engines.sglang:phase_hook",
    launch_words=("sglang.launch_server", "sglang serve", "sglang.srt"),
    name_words=frozenset({"sglang"}),
    ready_line="The server is fired up and ready to roll",
    default_port=30000,
    diagnose="logpipe.engines.sglang.doctor:diagnose",
    accept_rate_by_release="logpipe.engines.sglang.era:accept_rate_definition",
    about="logpipe.engines.sglang.fastlane:about",
    tables=("batches", "line_prefixes"),  # made by the core's migrations 0001 and 0014
    record_tables=("batches",),
    samples_sql="logpipe.engines.sglang:samples.sql",
    coded_samples_sql="logpipe.engines.sglang:coded_samples.sql",
    capacity=CAPACITY,
    server=SERVER,
    counters=COUNTERS,
)
