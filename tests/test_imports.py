"""No import cycle among logpipe's modules, lazy (function-level) imports included: the
module graph is read from the sources with ``ast`` and searched for strongly connected
components.  (Plugins and built-in kinds are loaded by name through the registries, not
imported, so a registry does not depend on what it registers.)"""

from __future__ import annotations

import ast
from pathlib import Path

from tests.conftest import ROOT

PACKAGE = ROOT / "logpipe"


def module_graph() -> dict[str, set[str]]:
    mods: dict[str, Path] = {}
    for path in PACKAGE.rglob("*.py"):
        parts = list(path.relative_to(ROOT).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        mods[".".join(parts)] = path
    for path in PACKAGE.rglob("*.c"):  # a C extension (setup.py) is a module that imports none
        mods[".".join(path.relative_to(ROOT).with_suffix("").parts)] = path

    def known(name: str) -> str | None:
        while name and name not in mods:
            name = name.rpartition(".")[0]
        return name or None

    graph: dict[str, set[str]] = {}
    for mod, path in mods.items():
        package = mod if path.name == "__init__.py" else mod.rpartition(".")[0]
        deps: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text() if path.suffix == ".py" else "")):
            if isinstance(node, ast.Import):
                deps.update(filter(None, (known(a.name) for a in node.names)))
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    pkg = package
                    for _ in range(node.level - 1):
                        pkg = pkg.rpartition(".")[0]
                    base = f"{pkg}.{base}" if base else pkg
                for a in node.names:  # `from pkg import submodule` depends on the submodule
                    sub = f"{base}.{a.name}"
                    deps.add(sub if sub in mods else known(base) or "")
        deps.discard(mod)
        deps.discard("")
        graph[mod] = deps
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []
    counter = 0
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                comp = []
                while True:
                    top = stack.pop()
                    on_stack.discard(top)
                    comp.append(top)
                    if top == node:
                        break
                if len(comp) > 1:
                    out.append(sorted(comp))
    return out


def test_the_search_finds_a_cycle() -> None:
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_logpipe_has_no_import_cycle() -> None:
    graph = module_graph()
    assert "logpipe.store" in graph and "logpipe.engines.sglang.parser" in graph
    assert graph["logpipe.db"] >= {"logpipe.lake", "logpipe.store"}  # edges are seen
    assert cycles(graph) == []


def folder_graph(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    """The module graph with each module collapsed to its top-level room (``logpipe.X``:
    a folder such as ``logpipe.analysis``, or a top-level module)."""
    def room(mod: str) -> str:
        return ".".join(mod.split(".")[:2])

    out: dict[str, set[str]] = {}
    for mod, deps in graph.items():
        out.setdefault(room(mod), set()).update(room(d) for d in deps if room(d) != room(mod))
    return out


def test_the_folder_graph_collapses_modules_to_rooms() -> None:
    graph = {"logpipe.a.x": {"logpipe.b"}, "logpipe.b": {"logpipe.a.y"}, "logpipe.a.y": set()}
    assert folder_graph(graph) == {"logpipe.a": {"logpipe.b"}, "logpipe.b": {"logpipe.a"}}
    assert cycles(folder_graph(graph)) == [["logpipe.a", "logpipe.b"]]


def test_logpipe_has_no_cycle_between_folders() -> None:
    """Rooms depend one way: no folder (``analysis``, ``engines``, ``ingest``, ...) or
    top-level module reaches back into one that depends on it."""
    rooms = folder_graph(module_graph())
    assert "logpipe.analysis" in rooms["logpipe.cli"]
    assert cycles(rooms) == []
