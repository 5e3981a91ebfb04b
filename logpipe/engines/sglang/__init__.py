"""SGLang: its server log (every release since 0.2), read by :mod:`.logparser` with the
parser of :mod:`.parser` (batch lines, events, HTTP access lines, embedded records) and
the C fast lane; its format eras (:mod:`.era`) and ``server_args`` (:mod:`.server_args`).
"""

from __future__ import annotations

from logpipe.engines import Engine
from logpipe.engines.sglang.kind import SOURCE

NAME = "sglang"

ENGINE = Engine(
    name=NAME,
    display="SGLang",
    log_kinds=(SOURCE,),
    log_parser="logpipe.engines.sglang.logparser:make_parser",
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
    samples_sql="logpipe.engines.sglang:samples.sql",
)
