"""Peer: the naive approach — a Python `re` loop over lines extracting decode fields
(``--vllm``: the fields of vLLM's periodic stats line)."""

import re
import sys

DECODE = re.compile(
    r"Decode batch.*?#running-req: (\d+), #token: (\d+), token usage: ([\d.]+), .*?"
    r"gen throughput \(token/s\): ([\d.]+), #queue-req: (\d+)"
)
VLLM = re.compile(
    r"Avg prompt throughput: ([\d.]+) tokens/s, Avg generation throughput: ([\d.]+) "
    r"tokens/s, Running: (\d+) reqs, Waiting: (\d+) reqs, \w+ KV cache usage: ([\d.]+)%"
)
pattern, types = ((VLLM, (float, float, int, int, float)) if "--vllm" in sys.argv[2:]
                  else (DECODE, (int, int, float, float, int)))

rows = []
with open(sys.argv[1], encoding="utf-8", errors="replace") as fh:
    for line in fh:
        m = pattern.search(line)
        if m:
            rows.append(tuple(t(v) for t, v in zip(types, m.groups(), strict=True)))
print(len(rows))
