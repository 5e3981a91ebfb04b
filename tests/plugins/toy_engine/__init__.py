"""A toy serving engine, registered the way a third-party engine is: an entry point in the
``logpipe.engines`` group naming :data:`ENGINE`.  Its server prints

    2026-12-02T10:00:00 TOY ready model=/models/toy
    2026-12-02T10:00:01 TOY stats kind=decode running=4 waiting=0 gen_tps=120.5

Like any engine it brings a parser (lines to rows, state as JSON) and its own storage: the
table ``toy_stats`` (its migrations folder) and its fragment of the neutral samples view
(``samples.sql``); the ingest, the store and compare do the rest."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from datetime import datetime
from pathlib import Path
from typing import Any

import polars as pl

from logpipe.engines import Engine
from logpipe.engines.parsing import Chunk, Era, RunSeen
from logpipe.sources import Source

LINE_RE = re.compile(r"^(?P<ts>\S+) TOY (?P<what>ready|stats)(?P<rest>.*)$")
KV_RE = re.compile(r"(\w+)=(\S+)")

KIND = Source(name="toy_server_log", description="the toy engine's server log",
              sniff=lambda head: " TOY ready " in head or " TOY stats " in head,
              specificity=15)

STATS = {"run_seq": pl.Int64, "line_no": pl.Int64, "ts": pl.Datetime("us"), "kind": pl.String,
         "running": pl.Int64, "waiting": pl.Int64, "gen_tps": pl.Float64}
REJECTS = {"run_seq": pl.Int64, "line_no": pl.Int64, "reason": pl.String, "raw": pl.String}


class ToyParser:
    """One run per ``ready`` line; ``stats`` lines are its samples."""

    block_bytes = 1 << 20
    spooled: frozenset[str] = frozenset()
    linked: frozenset[str] = frozenset()

    def __init__(self, state_json: str | None, fallback_date: str,
                 keep_text: bool = False) -> None:
        self.state = json.loads(state_json) if state_json else {"lines": 0, "run_seq": -1}

    @property
    def lines(self) -> int:
        return int(self.state["lines"])

    def count_lines(self, block: bytes | bytearray) -> int:
        return block.count(b"\n")

    def prepare(self, block: bytes | bytearray, first_line_no: int) -> list[str]:
        return block.decode("utf-8", errors="replace").split("\n")[:-1]

    def finish(self, prepared: list[str]) -> Chunk:
        stats: list[dict[str, Any]] = []
        rejects: list[dict[str, Any]] = []
        runs: dict[int, RunSeen] = {}
        for line in prepared:
            self.state["lines"] += 1
            n = self.state["lines"]
            m = LINE_RE.match(line)
            if m is None:
                seq = self.state["run_seq"]
                rejects.append({"run_seq": None if seq < 0 else seq, "line_no": n,
                                "reason": "not a toy line", "raw": line})
                continue
            ts = datetime.fromisoformat(m["ts"])
            kv = dict(KV_RE.findall(m["rest"]))
            if m["what"] == "ready":
                self.state["run_seq"] += 1
            seq = self.state["run_seq"]
            seen = runs.setdefault(seq, RunSeen(seq, n, ts, ts))
            seen.last_ts = ts
            if m["what"] == "ready":
                seen.facts = {"model": kv.get("model"), "role": "baseline",
                              "server_args": json.dumps(kv, sort_keys=True)}
            else:
                stats.append({"run_seq": seq, "line_no": n, "ts": ts, "kind": kv["kind"],
                              "running": int(kv["running"]), "waiting": int(kv["waiting"]),
                              "gen_tps": float(kv["gen_tps"])})
        return Chunk(tables={"toy_stats": pl.DataFrame(stats, schema=STATS),
                             "rejects": pl.DataFrame(rejects, schema=REJECTS)},
                     runs=list(runs.values()), may_hold_console=False)

    def end(self) -> Chunk | None:
        return None

    def state_json(self) -> str:
        return json.dumps(self.state)

    def era(self, previous: Era | None, seen: RunSeen) -> Era:
        return None, None

    def quotation(self, path: Path, rows: Mapping[str, int], noise: int) -> str | None:
        return None


ENGINE = Engine(name="toy", display="Toy", log_kinds=(KIND,),
                log_parser="toy_engine:ToyParser", packages=("toy-engine",),
                env_prefixes=("TOY_",), name_words=frozenset({"toy"}),
                tables=("toy_stats",), migrations="toy_engine:migrations",
                samples_sql="toy_engine:samples.sql")
