"""The phase hook `launch --phases` puts on a server's PYTHONPATH, run in a fresh
interpreter against a stand-in `sglang` package (the module and method names of the
releases it knows), and through `launch` against the stand-in server (which is not
SGLang: the hook then stays out of the way)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from logpipe import engines
from logpipe.sources.phases import parse

HOOK = Path(engines.phase_hook_dir(engines.engine_named("sglang")))  # type: ignore[arg-type]

FAKE_TP = '''
import time
class Mode:
    def __init__(self, m): self.m = m
    def is_decode(self): return self.m == "decode"
    def is_target_verify(self): return self.m == "verify"
class Batch:
    def __init__(self, m, n): self.forward_mode, self.reqs = Mode(m), [0] * n
class TpModelWorker:
    def forward_batch_generation(self, batch, forward_batch=None, is_verify=False):
        time.sleep(0.004)
        return None
'''
FAKE_NGRAM = '''
import time
from sglang.srt.managers.tp_worker import Batch, TpModelWorker
class Lens(list):
    device = type("D", (), {"type": "cpu"})()
    def sum(self): return __import__("builtins").sum(self)
class Result:
    def __init__(self, n): self.accept_lens = Lens([2] * n)
class NGRAMWorker:
    target_worker = TpModelWorker()
    def _prepare_for_speculative_decoding(self, batch):
        time.sleep(0.002)
    def forward_batch_generation(self, batch):
        self._prepare_for_speculative_decoding(batch)
        if batch.forward_mode.is_target_verify():
            self.target_worker.forward_batch_generation(batch, is_verify=True)
        time.sleep(0.001)
        return Result(len(batch.reqs))
'''
DRIVER = '''
import logging, sys
logging.basicConfig(stream=sys.stdout, level=logging.INFO, format="[%(asctime)s TP0] %(message)s")
import sitecustomize_chained_marker  # the next sitecustomize ran
from sglang.srt.speculative.ngram_worker import NGRAMWorker
from sglang.srt.managers.tp_worker import Batch, TpModelWorker
w = NGRAMWorker()
for _ in range(3):
    w.forward_batch_generation(Batch("verify", 4))
w.forward_batch_generation(Batch("extend", 4))   # a prefill: no cycle record
TpModelWorker().forward_batch_generation(Batch("decode", 3))  # a plain decode step
TpModelWorker().forward_batch_generation(Batch("decode", 3))  # and the next one
'''


def fake_site(root: Path, version: str) -> Path:
    site = root / "site"
    for pkg in ("sglang", "sglang/srt", "sglang/srt/managers", "sglang/srt/speculative"):
        (site / pkg).mkdir(parents=True, exist_ok=True)
        (site / pkg / "__init__.py").write_text("")
    (site / "sglang/srt/managers/tp_worker.py").write_text(FAKE_TP)
    (site / "sglang/srt/speculative/ngram_worker.py").write_text(FAKE_NGRAM)
    dist = site / f"sglang-{version}.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text(f"Metadata-Version: 2.1\nName: sglang\nVersion: {version}\n")
    other = root / "other"
    other.mkdir()
    (other / "sitecustomize.py").write_text(
        "import sys, types\nsys.modules['sitecustomize_chained_marker'] = "
        "types.ModuleType('m')\n")
    return site


def run_driver(tmp_path: Path, version: str, mode: str) -> str:
    site = fake_site(tmp_path, version)
    env = {**os.environ, "LOGPIPE_PHASES": mode,
           "PYTHONPATH": os.pathsep.join([str(HOOK), str(site), str(tmp_path / "other")])}
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent(DRIVER)], env=env,
                          capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout + proc.stderr


def test_the_hook_times_ngram_cycles_and_plain_decode_steps(tmp_path: Path) -> None:
    out = run_driver(tmp_path, "0.5.23", "host")
    rows, rejects = parse("\n".join(line.split("phase_timings: ", 1)[1]
                                    for line in out.splitlines() if "phase_timings: " in line))
    assert not rejects
    records = [json.loads(line.split("phase_timings: ", 1)[1])
               for line in out.splitlines() if "phase_timings: " in line]
    kinds = [r["kind"] for r in records]
    assert kinds == ["cycle", "cycle", "cycle", "step", "step"]  # the prefill made none
    cycle = records[0]
    assert set(cycle["phases_ms"]) == {"draft", "verify", "other"}
    # sleeps give lower bounds only (a loaded machine stretches them): each phase holds at
    # least its own sleep, so time put in the wrong phase leaves another one short
    for record in records[:3]:
        phases = record["phases_ms"]
        assert phases["verify"] >= 3.9 and phases["draft"] >= 1.9 and phases["other"] >= 0.9
    assert cycle["batch_size"] == 4 and cycle["accepted_tokens"] == 8
    assert cycle["synchronized"] is False and 0 <= cycle["hook_ms"] < 5  # ~0.05 ms unloaded
    step = records[-1]
    assert step["phases_ms"].keys() == {"decode"} and step["batch_size"] == 3
    # the period: from the previous decode iteration's start, so at least that whole
    # iteration; none for a first iteration or one after a prefill
    assert [("period_ms" in r) for r in records] == [False, True, True, False, True]
    for before, record in zip(records[:-1], records[1:], strict=True):
        if "period_ms" in record:
            assert record["period_ms"] >= sum(before["phases_ms"].values())
    assert "[" in out.splitlines()[0]  # through the server's logger, with its prefix


def test_an_unknown_release_is_said_and_left_alone(tmp_path: Path) -> None:
    out = run_driver(tmp_path, "0.4.7", "host")
    assert "phase_timings: " not in out
    assert "SGLang 0.4.7 is not a release whose phase methods are known" in out


def test_launch_phases_refuses_a_server_it_cannot_hook(tmp_path: Path) -> None:
    from logpipe.errors import InputError
    from logpipe.experiment.launch import _phase_env

    with pytest.raises(InputError, match="no phase hook"):
        _phase_env(["python", "my_server.py"], "host", {})
    env = _phase_env(["python", "-m", "sglang.launch_server", "--port", "1"], "sync",
                     {"PYTHONPATH": "/x"})
    assert env == {"PYTHONPATH": f"{HOOK}{os.pathsep}/x", "LOGPIPE_PHASES": "sync"}


# A stand-in for a GPU recipe's own site hook: an import finder that removes itself and asks
# the import system again (so it re-enters every other finder), and a chain that executes the
# first other sitecustomize.py on the path, which is logpipe's when logpipe's comes first
RECIPE_SITE = '''
import importlib.abc, importlib.util, os, sys

class _Finder(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name != "sglang.srt.speculative.ngram_worker":
            return None
        sys.meta_path.remove(self)
        try:
            spec = importlib.util.find_spec(name)
        finally:
            sys.meta_path.insert(0, self)
        run = spec.loader.exec_module
        def exec_module(module):
            run(module)
            module.RECIPE_PATCHED = True
        spec.loader.exec_module = exec_module
        return spec

if not any(isinstance(f, _Finder) for f in sys.meta_path):
    sys.meta_path.insert(0, _Finder())
_here = os.path.dirname(os.path.abspath(__file__))
for _d in sys.path:
    _f = os.path.join(_d or ".", "sitecustomize.py")
    if os.path.abspath(_d or ".") != _here and os.path.isfile(_f):
        exec(compile(open(_f).read(), _f, "exec"), {"__name__": "sitecustomize", "__file__": _f})
        break
'''
TWO_HOOKS_DRIVER = '''
import logging, sys
logging.basicConfig(stream=sys.stdout, level=logging.INFO, format="[TP0] %(message)s")
import sglang.srt.speculative.ngram_worker as ngram
from sglang.srt.managers.tp_worker import Batch
hooks = [f for f in sys.meta_path if getattr(f, "_logpipe_phase_hook", False)]
print("finders", len(hooks), "recipe", getattr(ngram, "RECIPE_PATCHED", False))
method, wraps = ngram.NGRAMWorker.forward_batch_generation, 0
while hasattr(method, "__wrapped__"):
    method, wraps = method.__wrapped__, wraps + 1
print("wraps", wraps)
ngram.NGRAMWorker().forward_batch_generation(Batch("verify", 2))
'''


def test_the_hook_composes_with_a_site_hook_that_chains_back_to_it(tmp_path: Path) -> None:
    site = fake_site(tmp_path, "0.5.23")
    recipe = tmp_path / "recipe"
    recipe.mkdir()
    (recipe / "sitecustomize.py").write_text(RECIPE_SITE)
    env = {**os.environ, "LOGPIPE_PHASES": "host",
           "PYTHONPATH": os.pathsep.join([str(HOOK), str(recipe), str(site)])}
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent(TWO_HOOKS_DRIVER)], env=env,
                          capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]  # was RecursionError in find_spec
    out = proc.stdout
    assert "finders 1 recipe True" in out  # one finder of logpipe's; the recipe's patch ran
    assert "wraps 1" in out  # the cycle method is timed once, not once per execution
    assert out.count("phase_timings: ") == 1


FAKE_TORCH = '''
import time
class _Event:
    def __init__(self, enable_timing=False): self.t = None
    def record(self, stream=None): self.t = time.perf_counter()
    def query(self): return True
    def synchronize(self): pass
    def elapsed_time(self, end): return (end.t - self.t) * 1000
class cuda:
    Event = _Event
    @staticmethod
    def is_available(): return True
    @staticmethod
    def synchronize(): raise AssertionError("host mode on a GPU never synchronises")
'''
EVENTS_DRIVER = '''
import logging, sys
logging.basicConfig(stream=sys.stdout, level=logging.INFO, format="[TP0] %(message)s")
import torch
from sglang.srt.speculative.ngram_worker import NGRAMWorker
from sglang.srt.managers.tp_worker import Batch, TpModelWorker
w = NGRAMWorker()
for _ in range(3):
    w.forward_batch_generation(Batch("verify", 4))
TpModelWorker().forward_batch_generation(Batch("decode", 3))
'''


def test_on_a_gpu_the_hook_times_with_cuda_events_without_synchronising(tmp_path: Path
                                                                         ) -> None:
    """A stand-in torch with a CUDA device: the phases are timed by events recorded on the
    stream and read once passed (the last at exit); the records say so, and nothing calls
    torch.cuda.synchronize()."""
    site = fake_site(tmp_path, "0.5.23")
    (site / "torch").mkdir()
    (site / "torch" / "__init__.py").write_text(FAKE_TORCH)
    env = {**os.environ, "LOGPIPE_PHASES": "host",
           "PYTHONPATH": os.pathsep.join([str(HOOK), str(site), str(tmp_path / "other")])}
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent(EVENTS_DRIVER)], env=env,
                          capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    records = [json.loads(line.split("phase_timings: ", 1)[1])
               for line in proc.stdout.splitlines() if "phase_timings: " in line]
    assert [r["kind"] for r in records] == ["cycle", "cycle", "cycle", "step"]
    assert {r["clock"] for r in records} == {"cuda_events"}
    for r in records[:3]:
        assert r["phases_ms"]["verify"] >= 3.9 and r["phases_ms"]["draft"] >= 1.9
    assert records[-1]["phases_ms"]["decode"] >= 3.9
