"""Record a real PyTorch profiler trace of a tiny speculative decode loop.

Not part of the package (it needs torch, which logpipe never does).  It runs a small
transformer-like model in a draft / verify / draft_extend loop under
``torch.profiler.profile`` with ``record_function`` ranges named like those phases and
writes the Chrome trace the way SGLang names it: ``{profile_id}-TP-{rank}.trace.json.gz``
(reference §6.3).  The samples under ``sample_logs/traces/`` were made with it::

    python scripts/make_torch_traces.py --device cpu  --out sample_logs/traces/cpu-decode \
        --profile-id 1777885700.1
    python scripts/make_torch_traces.py --device cuda --out sample_logs/traces/h200-decode

On CUDA it also runs one all-reduce through a single-rank NCCL group, so the trace holds
a communication kernel.
"""

from __future__ import annotations

import argparse
import gzip
import os
import shutil
import tempfile
import time
from pathlib import Path

import torch
import torch.nn.functional as F
from torch.profiler import ProfilerActivity, profile, record_function

HIDDEN, HEADS, LAYERS, VOCAB = 256, 4, 2, 2048


def layer(x: torch.Tensor, w: dict[str, torch.Tensor], kv: torch.Tensor) -> torch.Tensor:
    b, t, _ = x.shape
    q = (x @ w["q"]).view(b, t, HEADS, -1).transpose(1, 2)
    k = kv.view(b, -1, HEADS, HIDDEN // HEADS).transpose(1, 2)
    attn = F.scaled_dot_product_attention(q, k, k)
    x = x + attn.transpose(1, 2).reshape(b, t, HIDDEN) @ w["o"]
    return x + F.silu(x @ w["up"]) @ w["down"]


def forward(tokens: torch.Tensor, weights: list[dict[str, torch.Tensor]],
            emb: torch.Tensor, kv: torch.Tensor) -> torch.Tensor:
    x = emb[tokens]
    for w in weights:
        x = layer(x, w, kv)
    return torch.argmax(x @ emb.T, dim=-1)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--cycles", type=int, default=6)
    ap.add_argument("--profile-id", default="1777885800.5")
    args = ap.parse_args()
    torch.manual_seed(0)
    dev = torch.device(args.device)
    dtype = torch.bfloat16 if dev.type == "cuda" else torch.float32

    def weights(n: int) -> list[dict[str, torch.Tensor]]:
        return [{k: torch.randn(HIDDEN, HIDDEN, device=dev, dtype=dtype) * 0.02
                 for k in ("q", "o", "up", "down")} for _ in range(n)]

    target, draft = weights(LAYERS), weights(1)
    emb = torch.randn(VOCAB, HIDDEN, device=dev, dtype=dtype) * 0.02
    kv = torch.randn(1, 64, HIDDEN, device=dev, dtype=dtype)
    tokens = torch.zeros(1, 1, dtype=torch.long, device=dev)
    comm = None
    if dev.type == "cuda":
        import torch.distributed as dist

        os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
        os.environ.setdefault("MASTER_PORT", "29511")
        dist.init_process_group("nccl", rank=0, world_size=1)
        comm = dist
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if dev.type == "cuda" else [])
    with profile(activities=activities, record_shapes=False,
                 schedule=torch.profiler.schedule(wait=1, warmup=1, active=args.cycles)) as prof:
        for _ in range(args.cycles + 2):
            with record_function("draft"):
                proposal = tokens
                for _ in range(2):
                    proposal = torch.cat([proposal, forward(proposal, draft, emb, kv)[:, -1:]], 1)
            with record_function("verify"):
                checked = forward(proposal, target, emb, kv)
                if comm is not None:
                    comm.all_reduce(checked.float())
            with record_function("draft_extend"):
                forward(checked[:, -1:], draft, emb, kv)
            tokens = checked[:, -1:]
            if dev.type == "cuda":
                torch.cuda.synchronize()
            prof.step()
    args.out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        raw = Path(tmp) / "trace.json"
        prof.export_chrome_trace(str(raw))
        target_path = args.out / f"{args.profile_id}-TP-0.trace.json.gz"
        with raw.open("rb") as src, gzip.GzipFile(target_path, "wb", mtime=0) as dst:
            shutil.copyfileobj(src, dst)
    if comm is not None:
        comm.destroy_process_group()
    print(f"{target_path} {target_path.stat().st_size} bytes at {time.strftime('%F %T')}")


if __name__ == "__main__":
    main()
