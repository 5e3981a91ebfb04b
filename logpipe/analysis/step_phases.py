"""Per-phase time straight from a profiler trace: the scheduler steps the engine marked
(``trace_steps``: ``step[DECODE bs=48]``, ``step[VERIFY bs=48]``, ``step[EXTEND ...]``),
averaged per step kind, with the kernel time split by class.

This is the decomposition a comparison reports when its launches were profiled but no
phase dump exists: how long one decode (or verify) step keeps the device busy, and with
what, on each side."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from statistics import median
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from logpipe.store import Store


@dataclass(frozen=True)
class Step:
    run: str
    kind: str
    batch_size: int | None
    cpu_ms: float | None
    span_ms: float | None
    kernel_ms: float
    by_class: dict[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class Phase:
    """One step kind of one side: ``steps`` marked steps in ``traces`` traces."""

    kind: str
    steps: int
    traces: int
    batch_size: float | None
    span_ms: float | None
    """Median device-side span of a step (first kernel to last)."""
    kernel_ms: float
    """Median device time of the kernels inside a step."""
    cpu_ms: float | None
    by_class: dict[str, float]
    """Mean kernel time per step by kernel class."""

    @property
    def busy(self) -> float | None:
        """The share of the step's device span that kernels were running."""
        return self.kernel_ms / self.span_ms if self.span_ms else None

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "steps": self.steps, "traces": self.traces,
                "batch_size": self.batch_size, "span_ms": self.span_ms,
                "kernel_ms": self.kernel_ms, "cpu_ms": self.cpu_ms, "busy": self.busy,
                "kernel_ms_by_class": self.by_class}


def load_steps(store: Store, run_id: str) -> list[Step]:
    """The marked steps of every trace linked to ``run_id``, in trace order.  (The view
    steps every trace; a run without one, the most of them, is not asked it.)"""
    if store.one("SELECT 1 FROM traces WHERE run_id = ? LIMIT 1", [run_id]) is None:
        return []
    rows = store.con.execute(
        "SELECT source_path, step_kind, batch_size, cpu_ms, gpu_span_ms, kernel_ms, "
        "kernel_ms_by_class FROM trace_steps WHERE run_id = ? AND step_kind <> '' "
        "ORDER BY source_path, step_no", [run_id]).fetchall()
    return [Step(str(path), str(kind), bs, cpu, span, float(kms or 0.0),
                 {str(k): float(v) for k, v in (by or {}).items()})
            for path, kind, bs, cpu, span, kms, by in rows]


def phases(steps: Sequence[Step]) -> list[Phase]:
    """Steps grouped by kind (in the order kinds first appear), medians per step."""
    kinds: dict[str, list[Step]] = {}
    for s in steps:
        kinds.setdefault(s.kind, []).append(s)
    out = []
    for kind, group in kinds.items():
        classes = sorted({k for s in group for k in s.by_class})
        spans = [s.span_ms for s in group if s.span_ms is not None]
        cpus = [s.cpu_ms for s in group if s.cpu_ms is not None]
        sizes = [s.batch_size for s in group if s.batch_size is not None]
        out.append(Phase(
            kind=kind, steps=len(group), traces=len({s.run for s in group}),
            batch_size=float(median(sizes)) if sizes else None,
            span_ms=float(median(spans)) if spans else None,
            kernel_ms=float(median(s.kernel_ms for s in group)),
            cpu_ms=float(median(cpus)) if cpus else None,
            by_class={k: sum(s.by_class.get(k, 0.0) for s in group) / len(group)
                      for k in classes}))
    return out


def phase_line(p: Phase) -> str:
    """``DECODE ×2 (bs 48): span 2.19 ms, kernels 0.46 ms (21% busy: gemm 0.20, ...)``"""
    head = f"{p.kind} ×{p.steps}" + (f" (bs {p.batch_size:g})" if p.batch_size else "")
    parts = []
    if p.span_ms is not None:
        parts.append(f"span {p.span_ms:.2f} ms")
    if p.span_ms is None and p.kernel_ms == 0:  # CPU activities only: no device side
        host = f"host {p.cpu_ms:.2f} ms, " if p.cpu_ms is not None else ""
        return f"{head}: {host}no device kernels (a CPU-only trace)"
    classes = ", ".join(f"{k} {v:.3f}" for k, v in
                        sorted(p.by_class.items(), key=lambda kv: -kv[1]) if v > 0)
    busy = f"{p.busy:.0%} busy" if p.busy is not None else ""
    parts.append(f"kernels {p.kernel_ms:.3f} ms"
                 + (f" ({'; '.join(x for x in (busy, classes) if x)})" if busy or classes
                    else ""))
    return f"{head}: " + ", ".join(parts)
