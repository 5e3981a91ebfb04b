"""Golden rows: one real-format line per release family, parsed to exact values.

Lines are written by hand from the templates in the formats reference (§2), not produced
by the sample generator, so the generator and the parser cannot share a mistake.
"""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path

import pytest

from logpipe.ingest import ingest_paths
from tests.conftest import query

GOLDEN: list[tuple[str, str, dict]] = [
    ("0.2.15 prefill, time-only stamp, cache hit rate %",
     "[14:02:11 TP0] Prefill batch. #new-seq: 1, #new-token: 512, #cached-token: 0, "
     "cache hit rate: 0.00%, #running-req: 0, #queue-req: 0",
     dict(kind="prefill", tp_rank=0, new_seq=1, new_token=512, cached_token=0, running_req=0,
          queue_req=0, ts="2026-02-03 14:02:11", ts_raw="14:02:11",
          extra={"cache hit rate": 0.0})),
    ("0.2.15 mixed-chunk head",
     "[14:02:12 TP0] Prefill batch(mixed #running-req: 3). #new-seq: 1, #new-token: 40, "
     "#cached-token: 600, cache hit rate: 93.75%, #queue-req: 2",
     dict(kind="prefill", mixed_chunk=True, running_req=3, new_token=40, cached_token=600,
          queue_req=2, extra={"cache hit rate": 93.75})),
    ("0.3.x decode",
     "[2024-11-05 10:00:02 TP0] Decode batch. #running-req: 1, #token: 640, "
     "token usage: 0.01, gen throughput (token/s): 181.90, #queue-req: 0",
     dict(kind="decode", running_req=1, num_token=640, token_usage=0.01,
          gen_throughput=181.9, queue_req=0, cuda_graph=None, ts="2024-11-05 10:00:02",
          ts_raw=None, extra=None)),
    ("0.4.4 largest-len and trailing comma",
     "[2025-02-01 10:00:02 TP0] Decode batch. #running-req: 4, #token: 900, "
     "token usage: 0.02, accept len: 2.41, gen throughput (token/s): 181.90, "
     "largest-len: 0, #queue-req: 0, ",
     dict(kind="decode", running_req=4, accept_len=2.41, gen_throughput=181.9, queue_req=0,
          extra={"largest-len": 0})),
    ("0.4.9 SWA pool sub-values",
     "[2025-07-01 10:00:01 TP0] Prefill batch. #new-seq: 1, #new-token: 10, "
     "#cached-token: 0, #token: full=12, swa=3, token usage: full=0.10, swa=0.02, "
     "#running-req: 0, #queue-req: 0",
     dict(kind="prefill", num_token=12, token_usage=0.1, running_req=0, queue_req=0,
          extra={"#token": "full=12, swa=3", "token usage": "full=0.10, swa=0.02"})),
    ("0.4.10-0.5.3 DP TP EP, PD decode fields, trailing comma",
     "[2025-08-01 10:00:02 DP1 TP1 EP1] Decode batch. #running-req: 32, #token: 11179, "
     "token usage: 0.08, pre-allocated usage: 0.00, #retracted-req: 0, cuda graph: True, "
     "gen throughput (token/s): 1635.11, #queue-req: 0, ",
     dict(kind="decode", dp_rank=1, tp_rank=1, ep_rank=1, pp_rank=None, running_req=32,
          num_token=11179, token_usage=0.08, cuda_graph=True, graph_label="cuda graph",
          gen_throughput=1635.11, rank_tag="DP1 TP1 EP1",
          extra={"pre-allocated usage": 0.0, "#retracted-req": 0})),
    ("0.4.10+ hybrid SWA decode",
     "[2025-08-01 10:00:03] Decode batch. #running-req: 2, #full token: 700, "
     "full token usage: 0.05, #swa token: 175, swa token usage: 0.01, cuda graph: True, "
     "gen throughput (token/s): 99.50, #queue-req: 0, ",
     dict(num_token=700, token_usage=0.05, tp_rank=None,
          extra={"#swa token": 175, "swa token usage": 0.01})),
    ("0.5.4 forward iteration with space, accept rate",
     "[2025-11-11 04:06:27] Decode batch [4121], #running-req: 46, #token: 34901, "
     "token usage: 0.19, accept len: 2.30, accept rate: 0.43, cuda graph: False, "
     "gen throughput (token/s): 1447.08, #queue-req: 0, ",
     dict(forward_iter=4121, running_req=46, accept_len=2.3, accept_rate=0.43,
          cuda_graph=False, gen_throughput=1447.08)),
    ("0.5.5 forward iteration without space",
     "[2025-11-11 04:06:28] Decode batch[4161], #running-req: 46, #token: 34941, "
     "token usage: 0.19, cuda graph: True, gen throughput (token/s): 1500.00, #queue-req: 0, ",
     dict(forward_iter=4161, gen_throughput=1500.0)),
    ("0.5.9 prefill: input throughput before cpu graph",
     "[2026-01-05 20:02:51 TP0] Prefill batch, #new-seq: 1, #new-token: 158, "
     "#cached-token: 0, token usage: 0.08, #running-req: 31, #queue-req: 0, "
     "input throughput (token/s): 559.53, cpu graph: True",
     dict(kind="prefill", input_throughput=559.53, cuda_graph=True, graph_label="cpu graph",
          running_req=31)),
    ("0.5.10 prefill: graph first, MFU suffix, mamba pool",
     "[2026-02-05 20:02:51 TP0] Prefill batch, #new-seq: 1, #new-token: 158, "
     "#cached-token: 4, full token usage: 0.08, mamba usage: 0.02, #running-req: 0, "
     "#queue-req: 0, cuda graph: False, input throughput (token/s): 559.53, "
     "est. prefill TFLOPS/s (per GPU): 12.40",
     dict(token_usage=0.08, cuda_graph=False, input_throughput=559.53, cached_token=4,
          extra={"mamba usage": 0.02, "est. prefill TFLOPS/s (per GPU)": 12.4})),
    ("0.5.16 ms stamp, all rank tags, npu graph, HiSparse, cap len, occupancy %",
     "[2026-10-01 01:02:11.417 DP1 PP1 ATTN_CP0 MOE_DP3 TP12 EP12] Decode batch [4121], "
     "#running-req: 1, #token: 2577, token usage: 0.01, #gpu token: 1200, "
     "gpu token usage: 0.01, #cpu token: 1377, cpu token usage: 0.00, accept len: 2.30, "
     "accept rate: 0.43, cap len: 3.10, npu graph: True, gen throughput (token/s): 136.53, "
     "#queue-req: 0, fwd occupancy: 91.20%",
     dict(ts="2026-10-01 01:02:11.417", dp_rank=1, pp_rank=1, tp_rank=12, ep_rank=12,
          rank_tag="DP1 PP1 ATTN_CP0 MOE_DP3 TP12 EP12", graph_label="npu graph",
          accept_len=2.3, accept_rate=0.43, gen_throughput=136.53,
          extra={"#gpu token": 1200, "gpu token usage": 0.01, "#cpu token": 1377,
                 "cpu token usage": 0.0, "cap len": 3.1, "fwd occupancy": 91.2})),
    ("0.5.11+ prefill: pending/replay tokens, musa graph, PD prefill counters",
     "[2026-10-02 09:00:00 TP0] Prefill batch, #new-seq: 2, #new-token: 300, "
     "#cached-token: 0, token usage: 0.10, #running-req: 1, #queue-req: 3, "
     "#prealloc-req: 0, #inflight-req: 1, #pending-token: 12, #replay-token: 4, "
     "musa graph: False, input throughput (token/s): 1234.50, fwd+idle occupancy: 77.00%",
     dict(new_seq=2, queue_req=3, graph_label="musa graph", cuda_graph=False,
          input_throughput=1234.5,
          extra={"#prealloc-req": 0, "#inflight-req": 1, "#pending-token": 12,
                 "#replay-token": 4, "fwd+idle occupancy": 77.0})),
]


@pytest.fixture(scope="module")
def golden_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    import os

    folder = tmp_path_factory.mktemp("golden")
    log = folder / "golden.log"
    log.write_text("".join(line + "\n" for _, line, _ in GOLDEN))
    # noon of 2026-02-03 on this host's clock: the date time-only stamps take (the file's
    # modification date where the log was written, whatever the zone)
    stamp = datetime(2026, 2, 3, 12, 0).timestamp()
    os.utime(log, (stamp, stamp))
    db = folder / "g.duckdb"
    result = ingest_paths([log], db)
    assert not result.failed
    return db


@pytest.mark.parametrize("index", range(len(GOLDEN)), ids=[g[0] for g in GOLDEN])
def test_golden_row(golden_db: Path, index: int) -> None:
    _, _, expected = GOLDEN[index]
    cols = [k for k in expected if k != "extra"]
    select = ", ".join(f"CAST({c} AS VARCHAR)" if c == "ts" else c for c in cols)
    rows = query(golden_db, f"SELECT {select}, extra FROM batches WHERE line_no = ?",
                 [index + 1])
    assert len(rows) == 1, "line was not parsed as a batch row"
    got = dict(zip(cols, rows[0][:-1], strict=True))
    assert got == {c: expected[c] for c in cols}
    if "extra" in expected:
        extra = json.loads(rows[0][-1]) if rows[0][-1] is not None else None
        assert extra == expected["extra"]


def test_golden_has_no_rejects(golden_db: Path) -> None:
    assert query(golden_db, "SELECT count(*) FROM rejects") == [(0,)]


def test_every_known_key_is_in_a_column_not_extra(golden_db: Path) -> None:
    from logpipe.engines.sglang.batches import CANONICAL

    for (extra,) in query(golden_db, "SELECT extra FROM batches WHERE extra IS NOT NULL"):
        for key, value in json.loads(extra).items():
            # composite values (0.4.9 SWA) are kept raw beside their canonical column
            assert key not in CANONICAL or "=" in str(value), key
