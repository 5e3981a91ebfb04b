"""Peer: SGLang's own srt/debug_utils/log_parser.py, loaded by path (needs only polars)."""

import importlib.util
import sys

spec = importlib.util.spec_from_file_location("sglang_log_parser", sys.argv[1])
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
with open(sys.argv[2], encoding="utf-8", errors="replace") as fh:
    df = module.parse(fh.read())
print(df.height)
