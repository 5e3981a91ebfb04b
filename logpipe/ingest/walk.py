"""Which files an ingest reads, and the run names their paths suggest."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from logpipe.env import is_manifest_name
from logpipe.errors import InputError
from logpipe.readers import COMPRESSED_SUFFIXES

GENERIC_STEMS = {
    "server", "log", "logs", "output", "out", "stdout", "stderr", "launch",
    "server_log", "serve", "console", "run", "nohup", "launch_server",
}
"""File names that name no run (with every engine's name words, and ``<word>_server``)."""


def is_generic_stem(name: str) -> bool:
    from logpipe.engines import name_words

    name = name.lower()
    words = name_words()
    return name in GENERIC_STEMS or name in words or (
        name.endswith("_server") and name[: -len("_server")] in words)
TEXT_SUFFIXES = (".log", ".txt", ".out", ".err")


def walk(paths: Iterable[Path], exclude: Iterable[Path] = ()) -> list[tuple[Path, Path]]:
    """``(file, root)`` for files under ``paths`` in a stable order, skipping hidden entries,
    environment manifests, database files and ``exclude``."""
    skip = {p.resolve() for p in exclude}
    out: list[tuple[Path, Path]] = []
    for root in paths:
        if not root.exists():
            raise InputError("no such file or directory", path=root,
                             hint="check the path; folders are searched recursively")
        if root.is_file():
            out.append((root, root.parent))
            continue
        for p in sorted(root.rglob("*")):
            rel = p.relative_to(root)
            if any(part.startswith(".") for part in rel.parts) or not p.is_file():
                continue
            out.append((p, root))
    seen: set[Path] = set()
    result = []
    for p, root in out:
        rp = p.resolve()
        if (rp in seen or rp in skip or rp.name.endswith((".duckdb", ".duckdb.wal"))
                or is_manifest_name(rp)):
            continue
        seen.add(rp)
        result.append((p, root))
    return result


def run_base_name(path: Path) -> str:
    """A memorable run name: the file stem, or the folder name when the stem is generic."""
    name = path.name
    for suffix in COMPRESSED_SUFFIXES + TEXT_SUFFIXES:
        if name.lower().endswith(suffix):
            name = name[: -len(suffix)]
    for suffix in TEXT_SUFFIXES:
        if name.lower().endswith(suffix):
            name = name[: -len(suffix)]
    if not name or is_generic_stem(name):
        name = path.parent.name or name or "run"
    return name


def unique_run_name(path: Path, seq: int, taken: set[str]) -> str:
    """The name of the ``seq``-th run of ``path`` (``name``, ``name-2`` for a restart in the
    file), free in ``taken`` (every name in the database): :func:`free_name`."""
    base = run_base_name(path)
    if seq > 0:
        base = f"{base}-{seq + 1}"
    return free_name(path, base, taken)


def free_name(path: Path, base: str, taken: set[str]) -> str:
    """``base`` where ``taken`` does not have it, else qualified by the folder above the
    run's own (``campaign-b/01-baseline``: two campaigns both have a ``01-baseline``), and
    only then ``~k``; taken from now.  One rule for a database and a fleet's lake."""
    name, k = base, 2
    if name in taken:
        above = [f.name for f in path.parents if f.name and f.name != run_base_name(path)]
        if above and f"{above[0]}/{base}" not in taken:
            name = f"{above[0]}/{base}"
    while name in taken:
        name = f"{base}~{k}"
        k += 1
    taken.add(name)
    return name
