"""Peer: the naive approach — a Python `re` loop over lines extracting decode fields."""

import re
import sys

DECODE = re.compile(
    r"Decode batch.*?#running-req: (\d+), #token: (\d+), token usage: ([\d.]+), .*?"
    r"gen throughput \(token/s\): ([\d.]+), #queue-req: (\d+)"
)

rows = []
with open(sys.argv[1], encoding="utf-8", errors="replace") as fh:
    for line in fh:
        m = DECODE.search(line)
        if m:
            rows.append((int(m[1]), int(m[2]), float(m[3]), float(m[4]), int(m[5])))
print(len(rows))
