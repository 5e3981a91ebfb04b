"""Reading a vLLM server log into the store: new lines only (an appended file goes on
where the last ingest stopped, with the parser's state), one transaction (the caller's).

vLLM prints a stats line per logging interval (10 s by default), so its logs are small
beside SGLang's per-batch lines: the file streams through the line parser, and only the
access lines, which grow with the requests, are spooled."""

from __future__ import annotations

import hashlib
import json
import re
from datetime import datetime
from pathlib import Path
from typing import Any

import polars as pl

from logpipe import summaries
from logpipe.engines.vllm import NAME as ENGINE_NAME
from logpipe.engines.vllm.parser import LogState, Parsed, Parser
from logpipe.ingest.base import PARSER_VERSION, FileResult, Progress
from logpipe.ingest.changes import HEAD_HASH_BYTES, TAIL_HASH_BYTES, decide, record_log_source
from logpipe.ingest.walk import unique_run_name
from logpipe.readers import open_binary, skip_to
from logpipe.redaction import is_secret_key
from logpipe.store import Spool, Store

FLUSH_LINES = 200_000
"""Lines parsed between writes (memory stays flat on a long access log)."""

SCHEMAS: dict[str, dict[str, Any]] = {
    "vllm_stats": {
        "run_seq": pl.Int64, "line_no": pl.Int64, "ts": pl.Datetime("us"),
        "ts_raw": pl.String, "year_from": pl.String, "engine_index": pl.Int32,
        "engines_aggregated": pl.Int32, "prompt_tps": pl.Float64, "gen_tps": pl.Float64,
        "running": pl.Int64, "waiting": pl.Int64, "swapped": pl.Int64, "deferred": pl.Int64,
        "preemptions": pl.Int64, "corrupted": pl.Int64, "kv_device": pl.String,
        "kv_usage": pl.Float64, "cpu_kv_usage": pl.Float64, "prefix_hit_rate": pl.Float64,
        "external_prefix_hit_rate": pl.Float64, "mm_hit_rate": pl.Float64,
        "kv_fetch": pl.String, "engine_version": pl.String},
    "vllm_spec_metrics": {
        "run_seq": pl.Int64, "line_no": pl.Int64, "ts": pl.Datetime("us"),
        "stats_line_no": pl.Int64, "engine_index": pl.Int32, "form": pl.String,
        "cumulative": pl.Boolean, "accepted_tokens": pl.Int64, "drafted_tokens": pl.Int64,
        "emitted_tokens": pl.Int64, "spec_tokens": pl.Int64, "acceptance_rate": pl.Float64,
        "mean_acceptance_length": pl.Float64, "system_efficiency": pl.Float64,
        "accepted_tps": pl.Float64, "drafted_tps": pl.Float64,
        "per_position": pl.List(pl.Float64)},
    "events": {"run_seq": pl.Int64, "line_no": pl.Int64, "ts": pl.Datetime("us"),
               "kind": pl.String, "message": pl.String, "attrs": pl.String},
    "http_requests": {"run_seq": pl.Int64, "line_no": pl.Int64, "ts": pl.Datetime("us"),
                      "client": pl.String, "method": pl.String, "path": pl.String,
                      "protocol": pl.String, "status": pl.Int32, "status_text": pl.String},
    "rejects": {"run_seq": pl.Int64, "line_no": pl.Int64, "reason": pl.String,
                "raw": pl.String},
}
SPOOLED = ("http_requests",)
RECORD_TABLES = ("vllm_stats", "vllm_spec_metrics", "events", "http_requests")


def ingest_log(store: Store, path: Path, key: str, kind: str, head: bytes,
               progress: Progress | None, keep_text: bool = False,
               replace: bool = False) -> FileResult:
    """Read what is new in a vLLM server log (the caller's transaction)."""
    stat = path.stat()
    head_sha = hashlib.sha256(head[:HEAD_HASH_BYTES]).hexdigest()
    status, existing, detail = decide(store, path, key, stat, head_sha, replace)
    if status in ("duplicate", "changed"):
        return FileResult(key, status, kind=kind, detail=detail)
    state = LogState()
    offset = 0
    previous_sha: str | None = None
    generations = int(existing.get("generations") or 0) if existing else 0
    hasher = hashlib.sha256()
    res = FileResult(key, status, kind=kind)
    runs = _Runs(store, path, key)
    rejected = int(existing["rejected"] or 0) if existing else 0
    noise = int(existing["noise_lines"] or 0) if existing else 0
    fh = open_binary(path)
    try:
        if existing is not None:
            state = LogState.from_json(existing["state"])
            if status == "truncated":
                generations += 1
            else:
                offset = int(existing["bytes_ingested"] or 0)
                previous_sha = existing["sha256"]
                skip_to(fh, path, offset)
        lines_before = state.lines
        parser = Parser(state, datetime.fromtimestamp(stat.st_mtime).date())
        tail = bytearray()
        with Spool(store) as spool:
            n = 0
            for raw in fh:
                if not raw.endswith(b"\n"):
                    break  # a partial last line waits for the rest
                hasher.update(raw)
                tail += raw
                if len(tail) > 2 * TAIL_HASH_BYTES:
                    del tail[:-TAIL_HASH_BYTES]
                offset += len(raw)
                parser.feed(state.lines + 1, raw.decode("utf-8", errors="replace"))
                n += 1
                if n % FLUSH_LINES == 0:
                    rejected, noise = _write(store, key, parser, runs, res, spool,
                                             rejected, noise)
                    if progress:
                        progress(offset)
            parser.finish()
            rejected, noise = _write(store, key, parser, runs, res, spool, rejected, noise)
            spool.load()
        res.lines = state.lines - lines_before
        res.noise = noise - (int(existing["noise_lines"] or 0) if existing else 0)
        if progress:
            progress(stat.st_size)
    finally:
        fh.close()
    if res.lines == 0 and status == "appended":
        res.status = "unchanged"
    record_log_source(store, key, path, kind=kind, stat=stat, existing=existing,
                      status=status, head=head, tail=tail, offset=offset, hasher=hasher,
                      previous_sha=previous_sha, lines=state.lines, new_lines=res.lines,
                      rejected=rejected, noise=noise, state_json=state.to_json(),
                      generations=generations, parser_version=PARSER_VERSION)
    summaries.fold_ranges(store, key, lines_before)
    res.runs_created = runs.created
    return res


def _write(store: Store, key: str, parser: Parser, runs: _Runs, res: FileResult,
           spool: Spool, rejected: int, noise: int) -> tuple[int, int]:
    out = parser.take()
    runs.observe(out)
    ids = runs.ids()
    tables: dict[str, list[dict[str, Any]]] = {
        "vllm_stats": out.stats, "vllm_spec_metrics": out.spec, "events": out.events,
        "http_requests": out.http, "rejects": out.rejects}
    for table, rows in tables.items():
        if not rows:
            continue
        frame = pl.DataFrame([{k: r.get(k) for k in SCHEMAS[table]} for r in rows],
                             schema=SCHEMAS[table])
        frame = frame.with_columns(
            pl.col("run_seq").replace_strict(ids, return_dtype=pl.String, default=None)
            .alias("run_id")).drop("run_seq")
        if table in SPOOLED:
            written = spool.add(table, frame, source_path=key)
        else:
            written = store.insert(table, frame, source_path=key)
        res.rows[table] = res.rows.get(table, 0) + written
    return rejected + len(out.rejects), noise + out.noise


class _Runs:
    """The ``runs`` rows of one file: created as launches appear, widened as lines come,
    given their arguments and config once the startup lines say them."""

    def __init__(self, store: Store, path: Path, key: str) -> None:
        self.store = store
        self.path = path
        self.key = key
        self.created = 0
        self._ids: dict[int, str] = {}
        self._eras: dict[str, str | None] = {}
        for seq, rid, era in store.all(
                "SELECT run_seq, run_id, format_era FROM runs WHERE source_path = ?", [key]):
            self._ids[int(seq)] = str(rid)
            self._eras[str(rid)] = era
        self._taken: set[str] | None = None

    def ids(self) -> dict[int, str]:
        return dict(self._ids)

    def _name(self, seq: int) -> str:
        if self._taken is None:
            self._taken = {str(n) for (n,) in self.store.all("SELECT name FROM runs")}
        return unique_run_name(self.path, seq, self._taken)

    def observe(self, out: Parsed) -> None:
        new, updates = [], []
        for seq, info in sorted(out.runs.items()):
            era = _era(info)
            if seq in self._ids:
                era = era or self._eras.get(self._ids[seq])
            if seq not in self._ids:
                rid = hashlib.sha256(
                    f"{self.key}\n{seq}\n{info['first_ts']}".encode()).hexdigest()[:12]
                new.append((rid, self._name(seq), self.key, seq, info["first_line"],
                            info["first_ts"], info["last_ts"], era, None))
                self._ids[seq] = rid
                self.created += 1
                self._eras[rid] = era
            else:
                self.store.widen_run(self._ids[seq], info["first_ts"], info["last_ts"],
                                     era, 0)
                self._eras[self._ids[seq]] = era
            facts = _launch_facts(info)
            if facts:
                updates.append((self._ids[seq], facts))
        self.store.add_runs(new, engine=ENGINE_NAME)
        self.store.update_runs(updates)


def _era(info: dict[str, Any]) -> str | None:
    """``vllm <version>`` where the log prints it, else the engine generation its stats
    lines show (``vllm V0`` / ``vllm V1``)."""
    version = info.get("version")
    if version:
        return f"vllm {version}"
    return f"vllm {info['shape']}" if info.get("shape") else None


def _launch_facts(info: dict[str, Any]) -> dict[str, Any]:
    """``runs`` columns from what the startup lines said."""
    cfg: dict[str, Any] = info.get("config") or {}
    args: dict[str, Any] = dict(info.get("args") or {})
    if not cfg and not args and not info.get("version"):
        return {}
    out: dict[str, Any] = {}
    if info.get("version"):
        out["engine_version"] = str(info["version"])
    merged = _server_args(cfg, args)
    if merged:
        safe = {k: ("<redacted>" if is_secret_key(k) and v not in (None, "", False) else v)
                for k, v in merged.items()}
        out["server_args"] = json.dumps(safe, default=str, sort_keys=True)
        raw = info.get("args_raw") or info.get("config_raw") or ""
        for k in merged:
            if is_secret_key(k):
                raw = re.sub(rf"""(['"]?{re.escape(k)}['"]?\s*[:=]\s*)"""
                             r"""(\[[^\]]*\]|'[^']*'|"[^"]*"|[^,})]+)""",
                             lambda m: m.group(1) + "'<redacted>'", raw)
        out["server_args_raw"] = raw[:8000]
    model = args.get("model") or args.get("model_tag") or cfg.get("model")
    if model:
        out["model"] = str(model)
    for col, name in (("tp_size", "tensor_parallel_size"), ("pp_size", "pipeline_parallel_size"),
                      ("dp_size", "data_parallel_size")):
        value = merged.get(name)
        if isinstance(value, int):
            out[col] = value
        elif cfg or args:  # the args or config were printed: an absent size is the default
            out[col] = 1
    # expert parallelism spans the TP x DP ranks when it is on (--enable-expert-parallel)
    if cfg or args:
        out["ep_size"] = out["tp_size"] * out["dp_size"] if merged.get(
            "enable_expert_parallel") is True else 1
    spec = _spec_config(args.get("speculative_config"), cfg.get("speculative_config"))
    if spec is not None:
        out["spec_algorithm"] = spec.get("method")
        steps = spec.get("num_speculative_tokens")
        out["spec_num_draft_tokens"] = int(steps) if isinstance(steps, int) else None
        out["role"] = "speculative"
    elif cfg or args:
        out["role"] = "baseline"
    return out


def _spec_config(from_args: Any, from_config: Any) -> dict[str, Any] | None:
    for value in (from_args, from_config):
        if isinstance(value, dict) and value:
            return value
        if isinstance(value, str) and value not in ("None", ""):
            if value.strip().startswith("{"):
                try:
                    parsed = json.loads(value)
                    if isinstance(parsed, dict):
                        return parsed
                except ValueError:
                    pass
            method = _repr_field(value, "method")
            if method:
                tokens = _repr_field(value, "num_spec_tokens") or \
                    _repr_field(value, "num_speculative_tokens")
                return {"method": method,
                        "num_speculative_tokens": int(tokens) if tokens and
                        tokens.isdigit() else None}
    return None


def _repr_field(text: str, name: str) -> str | None:
    m = re.search(rf"\b{name}=['\"]?([\w.-]+)", text)
    return m.group(1) if m else None


CONFIG_KEYS = ("dtype", "max_seq_len", "tensor_parallel_size", "pipeline_parallel_size",
               "data_parallel_size", "quantization", "enforce_eager", "kv_cache_dtype",
               "device_config", "enable_prefix_caching", "enable_chunked_prefill",
               "disable_custom_all_reduce", "seed", "served_model_name", "load_format")
"""Keys of the engine-config line that describe what ran (the rest are paths, reprs of
nested configs, tokenizer details)."""


def _server_args(cfg: dict[str, Any], args: dict[str, Any]) -> dict[str, Any]:
    """The arguments a run's environment is built from: the engine config's settings,
    then the non-default arguments the user gave (which win)."""
    out: dict[str, Any] = {k: cfg[k] for k in CONFIG_KEYS if k in cfg}
    if "speculative_config" in cfg and cfg["speculative_config"] not in (None, "None"):
        out["speculative_config"] = cfg["speculative_config"]
    out.update({k: v for k, v in args.items() if k != "model_tag"})
    return out
