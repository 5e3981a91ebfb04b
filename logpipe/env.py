"""A run's environment: capture it, find it, tier it, fingerprint it, diff it.

SGLang's log never states the GPU, driver, package versions or environment variables, so
the environment comes from (highest precedence first): ``--env KEY=VALUE`` on the command
line, a sidecar manifest ``<log>.env.json``, an ``env.json`` in the log's folder or the
nearest parent up to the ingest root, a ``collect_env.txt`` report there or beside the log
(``python -m vllm.collect_env``: :mod:`logpipe.collect_env`), and facts harvested from the
log itself (server arguments, format era).  Every value keeps its source.

Keys are flat strings: environment variables by name (``NCCL_ALGO``), ``arg.<server arg>``,
``pkg.<package>``, ``gpu.*``, ``cuda.*``, ``host.*``, ``manifest.*``, ``tag.<name>``, and
what the log itself says (source ``log``): NCCL's ``set by environment`` variables and
``nccl.version`` (``NCCL_DEBUG=INFO``), ``adjusted.<arg>`` (SGLang's own "reset to",
"adjusted to", "disabled because" lines) and ``effective.<limit>`` (the capacity line).
Each key has a tier (``schemas/tiers.toml``); the fingerprint hashes the identity tier.

Invariants: values of secret-looking keys never leave :func:`capture` or
:func:`build_env` unredacted; a run without a manifest is ``complete = False`` and is
never reported as matching another run.
"""

from __future__ import annotations

import fnmatch
import hashlib
import json
import os
import platform
import shlex
import shutil
import socket
import subprocess
import sys
import tomllib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from typing import Any

from logpipe import collect_env
from logpipe.errors import InputError
from logpipe.redaction import is_secret_key
from logpipe.releases import in_range
from logpipe.resources import schemas_dir

MANIFEST_VERSION = 1
REDACTED = "<redacted>"
TIERS = ("identity", "capacity", "treatment", "annotation")
"""``capacity`` keys (running-request, batch-size, token and memory limits) must match only
where the load reached them: :mod:`logpipe.analysis.pairing` judges them against what each run did.
Like treatment and annotation keys, they are not part of the fingerprint."""
# What a captured manifest states and a server log alone never does: for a run without a
# manifest these identity facts are unknown (environment variables as one group).
ENGINE_PACKAGE = "pkg.<engine>"
"""Stands for the engine's own package among the facts a manifest states: known when any
engine's package version is (``pkg.sglang``, ``pkg.vllm``, ...)."""
MANIFEST_IDENTITY_KEYS = ("gpu.model", "gpu.count", "gpu.driver", "cuda.version",
                          ENGINE_PACKAGE, "pkg.torch")
ENV_VARIABLES = "environment variables"
CAPTURE_PREFIXES = (
    "NCCL_", "CUDA_", "TORCH_", "PYTORCH_", "NVIDIA_", "OMP_", "TRITON_",
    "FLASHINFER_", "NVSHMEM_", "UCX_", "MKL_", "CUBLAS_", "CUDNN_", "TORCHINDUCTOR_", "DEEPEP_",
    "TRTLLM_", "MC_", "GLOO_", "NVTE_", "HF_", "TOKENIZERS_", "LD_PRELOAD", "MALLOC_",
)
"""Environment variables captured whatever the engine (each engine adds its own)."""
PACKAGES = (
    "flashinfer-python", "flashinfer", "flashinfer-cubin", "flashinfer-jit-cache", "torch",
    "triton", "nvidia-nccl-cu12", "nvidia-nccl-cu13", "deep-ep", "deep-gemm",
    "transformers", "xgrammar",
)
"""Packages whose versions are captured whatever the engine (each engine adds its own)."""


def capture_prefixes() -> tuple[str, ...]:
    from logpipe import engines

    return (*CAPTURE_PREFIXES, *engines.env_prefixes())


def packages() -> tuple[str, ...]:
    from logpipe import engines

    return tuple(dict.fromkeys((*engines.packages(), *PACKAGES)))


MANIFEST_NAMES = ("env.json",)
SIDECAR_SUFFIX = ".env.json"


# ----------------------------------------------------------------------------- capture

def _run(cmd: list[str]) -> str | None:
    exe = shutil.which(cmd[0])
    if exe is None:
        return None
    try:
        proc = subprocess.run([exe, *cmd[1:]], capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.SubprocessError):
        return None
    return proc.stdout if proc.returncode == 0 else None


def _gpus(nvidia_smi: str) -> dict[str, Any]:
    out = _run([nvidia_smi, "--query-gpu=name,memory.total,driver_version,uuid",
                "--format=csv,noheader,nounits"])
    if out is None:
        return {"available": False, "reason": f"{nvidia_smi} not found or failed"}
    gpus = []
    for line in out.strip().splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) >= 3:
            gpus.append({"name": parts[0], "memory_mib": int(float(parts[1])),
                         "driver": parts[2], "uuid": parts[3] if len(parts) > 3 else None})
    header = _run([nvidia_smi]) or ""
    cuda = None
    if "CUDA Version:" in header:
        cuda = header.split("CUDA Version:", 1)[1].split()[0].strip("|")
    return {"available": True, "devices": gpus, "cuda_version": cuda}


def _packages() -> dict[str, str]:
    found = {}
    for name in packages():
        try:
            found[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return found


_VERSIONS_SCRIPT = (
    "import json, sys\n"
    "from importlib import metadata\n"
    "out = {}\n"
    "for name in sys.argv[1:]:\n"
    "    try:\n"
    "        out[name] = metadata.version(name)\n"
    "    except metadata.PackageNotFoundError:\n"
    "        pass\n"
    "print(json.dumps(out))\n"
)


def interpreter_of(command: list[str]) -> str | None:
    """The Python interpreter that will run ``command``: its first word when that is a
    Python, else the interpreter named by the ``#!`` line of the script it runs
    (``sglang serve``, a venv's ``bin/`` script).  None when it is not a Python program."""
    if not command:
        return None
    exe = shutil.which(command[0]) or (command[0] if Path(command[0]).is_file() else None)
    if exe is None:
        return None
    if Path(exe).name.startswith("python"):
        return exe
    try:
        with open(exe, "rb") as fh:
            first = fh.readline(512)
    except OSError:
        return None
    if not first.startswith(b"#!"):
        return None
    words = first[2:].decode(errors="replace").split()
    if words and Path(words[0]).name == "env" and len(words) > 1:
        words = words[1:]
    return (shutil.which(words[0]) or words[0]) if words and "python" in words[0] else None


def packages_of(interpreter: str) -> dict[str, str] | None:
    """Versions of :func:`packages` installed for ``interpreter`` (it is asked through
    ``importlib.metadata``; nothing is imported)."""
    try:
        proc = subprocess.run([interpreter, "-c", _VERSIONS_SCRIPT, *packages()],
                              capture_output=True, text=True, timeout=60)
        return dict(json.loads(proc.stdout)) if proc.returncode == 0 else None
    except (OSError, subprocess.SubprocessError, ValueError):
        return None


def _cpu() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


ARG_ALIASES = {
    "tp": "tp_size", "tensor_parallel_size": "tp_size", "dp": "dp_size",
    "data_parallel_size": "dp_size", "ep": "ep_size", "expert_parallel_size": "ep_size",
    "pp": "pp_size", "pipeline_parallel_size": "pp_size", "model": "model_path",
    "mem_fraction": "mem_fraction_static",
}


def launch_args(command: list[str]) -> dict[str, Any]:
    """``--tp 8 --model-path m --enable-x`` → ``{"tp_size": "8", "model_path": "m", ...}``."""
    args: dict[str, Any] = {}
    i = 0
    while i < len(command):
        token = command[i]
        if token.startswith("--") and len(token) > 2:
            name, eq, value = token[2:].partition("=")
            key = name.replace("-", "_")
            key = ARG_ALIASES.get(key, key)
            if eq:
                args[key] = value
            elif i + 1 < len(command) and not command[i + 1].startswith("--"):
                args[key] = command[i + 1]
                i += 1
            else:
                args[key] = True
        i += 1
    return args


def redact_command(command: list[str]) -> list[str]:
    """The command with the values of secret-looking options replaced."""
    out: list[str] = []
    hide_next = False
    for token in command:
        if hide_next and not token.startswith("--"):
            out.append(REDACTED)
            hide_next = False
            continue
        hide_next = False
        if token.startswith("--"):
            name, eq, _ = token[2:].partition("=")
            if is_secret_key(name.replace("-", "_")):
                if eq:
                    out.append(f"--{name}={REDACTED}")
                    continue
                hide_next = True
        out.append(token)
    return out


def redact_mapping(values: Mapping[str, Any]) -> dict[str, Any]:
    return {k: (REDACTED if is_secret_key(k) and v not in (None, "") else v)
            for k, v in values.items()}


def _timezone() -> dict[str, Any]:
    """The host's zone: SGLang stamps its lines in local time."""
    now = datetime.now().astimezone()
    offset = now.utcoffset()
    return {"name": os.environ.get("TZ") or now.tzname(),
            "utc_offset_s": int(offset.total_seconds()) if offset is not None else None}


def capture(command: list[str] | None = None, environ: Mapping[str, str] | None = None,
            nvidia_smi: str = "nvidia-smi") -> dict[str, Any]:
    """The manifest of this host, now (see ``schemas/manifest.schema.json``).  With the
    launch ``command``, the packages are those of the interpreter that will run it."""
    environ = os.environ if environ is None else environ
    prefixes = capture_prefixes()
    variables = {k: v for k, v in sorted(environ.items()) if k.startswith(prefixes)}
    interpreter = interpreter_of(command) if command else None
    packages = packages_of(interpreter) if interpreter else None
    manifest: dict[str, Any] = {
        "logpipe_manifest": MANIFEST_VERSION,
        "captured_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "timezone": _timezone(),
        "env": redact_mapping(variables),
        "gpu": _gpus(nvidia_smi),
        # the packages of the interpreter that runs the server, where the command names one
        "packages": packages if packages is not None else _packages(),
        "packages_of": interpreter if packages is not None else sys.executable,
        "host": {"name": socket.gethostname(), "cpu": _cpu(), "kernel": platform.release(),
                 "os": platform.platform(), "python": platform.python_version()},
    }
    if command:
        manifest["command"] = shlex.join(redact_command(command))
        manifest["launch_args"] = redact_mapping(launch_args(command))
    return manifest


# --------------------------------------------------------------------------- manifests

def load_manifest(path: Path) -> dict[str, Any]:
    if collect_env.is_report_name(path):
        return collect_env.load(path)
    try:
        data = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"cannot read manifest: {exc}", path=path) from exc
    except json.JSONDecodeError as exc:
        raise InputError(f"manifest is not valid JSON: {exc.msg}", path=path, line=exc.lineno,
                         hint="write manifests with `logpipe env capture -o FILE`") from exc
    if not isinstance(data, dict):
        raise InputError("manifest must be a JSON object", path=path, line=1)
    return data


def flatten_manifest(m: Mapping[str, Any]) -> dict[str, Any]:
    """Manifest → flat keys (see module docstring)."""
    flat: dict[str, Any] = {}
    for k, v in (m.get("env") or {}).items():
        flat[str(k)] = v
    gpu = m.get("gpu") or {}
    devices = gpu.get("devices") or []
    if devices:
        names = sorted({d.get("name") for d in devices})
        flat["gpu.model"] = names[0] if len(names) == 1 else ", ".join(map(str, names))
        flat["gpu.count"] = len(devices)
        flat["gpu.memory_mib"] = devices[0].get("memory_mib")
        flat["gpu.driver"] = devices[0].get("driver")
        flat["gpu.uuids"] = ",".join(str(d.get("uuid")) for d in devices if d.get("uuid"))
    if gpu.get("cuda_version"):
        flat["cuda.version"] = gpu["cuda_version"]
    for k, v in (m.get("cuda") or {}).items():  # a collect_env report's CUDA facts
        flat[f"cuda.{k}"] = v
    for k, v in (m.get("packages") or {}).items():
        flat[f"pkg.{k}"] = v
    for k, v in (m.get("host") or {}).items():
        flat[f"host.{k}"] = v
    for k, v in (m.get("launch_args") or {}).items():
        flat[f"arg.{k}"] = v
    if m.get("command"):
        command = str(m["command"])
        try:
            flat["command"] = shlex.join(redact_command(shlex.split(command)))
        except ValueError:  # unbalanced quotes: keep nothing rather than a secret
            flat["command"] = REDACTED if "--" in command else command
    if m.get("captured_at"):
        flat["manifest.captured_at"] = m["captured_at"]
    if m.get("packages_of"):
        flat["manifest.packages_of"] = m["packages_of"]
    tz = m.get("timezone") or {}
    if tz.get("name") is not None:
        flat["host.timezone"] = tz["name"]
    if tz.get("utc_offset_s") is not None:
        flat["host.utc_offset_s"] = tz["utc_offset_s"]
    for k, v in (m.get("launch") or {}).items():
        flat[f"launch.{k}"] = v
    for k, v in (m.get("tags") or {}).items():
        flat[f"tag.{k}"] = v
    return {k: (REDACTED if is_secret_key(k.split(".", 1)[-1]) and v not in (None, "") else v)
            for k, v in flat.items()}


def is_manifest_name(path: Path) -> bool:
    return (path.name in MANIFEST_NAMES or path.name.endswith(SIDECAR_SUFFIX)
            or collect_env.is_report_name(path))


def discover(log: Path, root: Path) -> list[Path]:
    """Manifests for ``log``, lowest precedence first: the nearest ``collect_env.txt``
    report from the ingest root down to the log's folder, the nearest folder ``env.json``
    (what ``logpipe`` captured outranks what a report says), then the sidecars (a
    ``<log>.collect_env.txt`` report below a ``<log>.env.json``)."""
    log = log.resolve()
    root = root.resolve()
    if root.is_file():
        root = root.parent
    found: list[Path] = []
    folder = log.parent
    chain = []
    while True:
        chain.append(folder)
        if folder == root or folder.parent == folder or root not in folder.parents:
            break
        folder = folder.parent
    for name in (*collect_env.NAMES, "env.json"):
        nearest = next((f / name for f in chain if (f / name).is_file()), None)
        if nearest is not None:
            found.append(nearest)
    stems = [log.name]
    for suffix in (".gz", ".zst", ".zstd"):
        if log.name.endswith(suffix):
            stems.append(log.name[: -len(suffix)])
    for sidecar in (collect_env.SIDECAR_SUFFIX, SIDECAR_SUFFIX):
        for c in (log.with_name(stem + sidecar) for stem in stems):
            if c.is_file():
                found.append(c)
                break
    return found


# ------------------------------------------------------------------------------- tiers

@dataclass
class Tiers:
    rules: list[tuple[str, str]]
    performance_prefixes: tuple[str, ...]

    @classmethod
    def load(cls, user_file: Path | None = None) -> Tiers:
        default = tomllib.loads((schemas_dir() / "tiers.toml").read_text())
        rules: list[tuple[str, str]] = []
        prefixes = tuple(default.get("performance_prefixes", ()))
        if user_file is not None:
            try:
                user = tomllib.loads(user_file.read_text())
            except (OSError, tomllib.TOMLDecodeError) as exc:
                raise InputError(f"cannot read tiers file: {exc}", path=user_file,
                                 hint="see schemas/tiers.toml for the format") from exc
            for rule in user.get("rules", []):
                rules += [(k, cls._check(rule.get("tier"), user_file)) for k in rule["keys"]]
            prefixes = tuple(user.get("performance_prefixes", prefixes))
        for rule in default.get("rules", []):
            rules += [(k, rule["tier"]) for k in rule["keys"]]
        return cls(rules, prefixes)

    @staticmethod
    def _check(tier: Any, path: Path) -> str:
        if tier not in TIERS:
            raise InputError(f"unknown tier {tier!r}", path=path,
                             hint="tiers are: " + ", ".join(TIERS))
        return str(tier)

    def tier(self, key: str) -> str:
        memo = self.__dict__.setdefault("_memo", {})
        found = memo.get(key)
        if found is None:  # every run of a file asks for the same few hundred keys
            found = memo[key] = self._tier(key)
        return str(found)

    def _tier(self, key: str) -> str:
        for pattern, tier in self.rules:
            if fnmatch.fnmatchcase(key, pattern):
                return tier
        if "." not in key:  # an environment variable
            return "identity" if key.startswith(self.performance_prefixes) else "annotation"
        return "identity" if key.startswith("arg.") else "annotation"


# ------------------------------------------------------------------ build, fingerprint

@dataclass
class Entry:
    value: Any
    source: str
    tier: str = "annotation"
    conflict: str | None = None

    def as_json(self) -> dict[str, Any]:
        out = {"value": self.value, "source": self.source, "tier": self.tier}
        if self.conflict:
            out["conflict"] = self.conflict
        return out


@dataclass
class RunEnv:
    entries: dict[str, Entry] = field(default_factory=dict)
    complete: bool = False
    manifests: list[str] = field(default_factory=list)

    def fingerprint(self) -> str:
        return fingerprint({k: e.value for k, e in self.entries.items()
                            if e.tier == "identity"})

    def to_json(self) -> str:
        return json.dumps({k: e.as_json() for k, e in sorted(self.entries.items())},
                          default=str)

    @classmethod
    def from_json(cls, text: str | None, complete: bool = False) -> RunEnv:
        data = json.loads(text) if text else {}
        return cls({k: Entry(v.get("value"), v.get("source", "?"), v.get("tier", "annotation"),
                             v.get("conflict")) for k, v in data.items()}, complete)


def canonical(value: Any) -> str:
    """One text per meaning: ``8``, ``"8"`` and ``8.0`` agree; so do ``True`` and ``"true"``."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        f = float(value)
        return str(int(f)) if f.is_integer() else repr(f)
    if isinstance(value, list | tuple | dict):
        return json.dumps(value, sort_keys=True, default=str, separators=(",", ":"))
    text = str(value).strip()
    if text in ("True", "False", "true", "false"):
        return text.lower()
    if text in ("None", "null"):
        return "null"
    try:
        return canonical(float(text)) if text.lower() not in ("nan", "inf", "-inf") else text
    except ValueError:
        return text


def fingerprint(identity: Mapping[str, Any]) -> str:
    """Stable hash of identity keys and values (order and value types don't matter)."""
    items = sorted((k, canonical(v)) for k, v in identity.items())
    blob = json.dumps(items, separators=(",", ":"))
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def forced_variables(engine: str | None, entries: Mapping[str, Entry]
                     ) -> list[tuple[str, str, str, str]]:
    """``(variable, value, engine name, engine and release)`` an engine sets itself at launch (its
    :class:`logpipe.engines.CapacityRules`), for the release of its package in
    ``entries``: the run's engine's, or every engine's whose package is there where the
    run's engine is not known."""
    from logpipe.engines import engine_named, engines

    known = engine_named(engine) if engine else None
    out = []
    for e in [known] if known is not None else engines():
        version = entries.get(f"pkg.{e.packages[0]}") if e.packages else None
        if version is None or not version.value:
            continue
        for var, first, last, value in e.capacity.forced_variables:
            if in_range(str(version.value), first, last):
                out.append((var, value, e.name, f"{e.display} {version.value}"))
    return out


CAPACITY_FACTS = ("max_total_num_tokens", "chunked_prefill_size", "max_prefill_tokens",
                  "max_running_requests", "context_len")


def log_facts(events: Iterable[tuple[str, Mapping[str, Any]]]) -> dict[str, Any]:
    """Environment facts a server log states, from its ``(kind, attrs)`` events: NCCL's
    variables and version, the settings SGLang changed itself, its effective limits."""
    facts: dict[str, Any] = {}
    for kind, attrs in events:
        if kind == "nccl_env" and attrs.get("variable"):
            facts[str(attrs["variable"])] = attrs.get("value")
            facts["nccl.debug_info"] = True
        elif kind == "nccl_version" and attrs.get("nccl_version"):
            facts["nccl.version"] = str(attrs["nccl_version"]).split("+")[0]
            if attrs.get("nccl_debug_info"):
                # NCCL INFO lines are there (NCCL_DEBUG=INFO): every variable NCCL read
                # from the environment says "set by environment"; the others are unset
                facts["nccl.debug_info"] = True
        elif kind in ("setting_adjusted", "attention_backend") and attrs.get("arg"):
            facts[f"adjusted.{attrs['arg']}"] = attrs.get("value")
        elif kind == "capacity":
            for name in CAPACITY_FACTS:
                if attrs.get(name) is not None:
                    facts.setdefault(f"effective.{name}", attrs[name])
        elif kind == "load_weight":
            if attrs.get("phase") == "begin" and attrs.get("avail_mem_gb") is not None:
                facts.setdefault("effective.avail_mem_gb_at_load", attrs["avail_mem_gb"])
            if attrs.get("dtype"):
                facts.setdefault("effective.weight_dtype", attrs["dtype"])
            if attrs.get("mem_usage_gb") is not None and attrs.get("phase") == "end":
                facts.setdefault("effective.weight_mem_gb", attrs["mem_usage_gb"])
        elif kind == "kv_cache":
            if attrs.get("dtype"):
                facts.setdefault("effective.kv_cache_dtype", attrs["dtype"])
            if attrs.get("num_tokens") is not None:
                facts.setdefault("effective.kv_cache_tokens", attrs["num_tokens"])
        elif kind == "graph_capture" and isinstance(attrs.get("bs"), list):
            facts.setdefault("effective.cuda_graph_bs", attrs["bs"])
        elif kind == "startup_timings":
            for name, value in attrs.items():
                facts.setdefault(f"startup.{name}", value)
    return facts


def build_env(
    *,
    tiers: Tiers,
    manifests: Iterable[tuple[str, Mapping[str, Any]]] = (),
    server_args: Mapping[str, Any] | None = None,
    format_era: str | None = None,
    cli_env: Mapping[str, Any] | None = None,
    tags: Mapping[str, Any] | None = None,
    log_facts: Mapping[str, Any] | None = None,
    engine: str | None = None,
) -> RunEnv:
    """Merge every source of a run's environment (lowest precedence first).

    ``manifests`` are ``(source label, manifest)`` pairs, lowest precedence first.  The
    server's printed arguments are the effective values of ``arg.*`` keys: where a
    manifest's launch command disagrees, the printed value wins and the conflict is noted.
    ``log_facts`` (:func:`log_facts`) are what the log says about its environment: where a
    manifest says otherwise, both are kept (the conflict is noted) and the log's effective
    value wins.
    """
    env = RunEnv()
    entries = env.entries
    for label, manifest in manifests:
        # a report without the run's variables (torch's collect_env) leaves them unknown
        env.complete = env.complete or bool(manifest.get("env_captured", True))
        env.manifests.append(label)
        for key, value in flatten_manifest(manifest).items():
            entries[key] = Entry(value, label)
    for key, value in (server_args or {}).items():
        k = f"arg.{key}"
        value = REDACTED if is_secret_key(key) and value not in (None, "", False) else value
        previous = entries.get(k)
        conflict = None
        if previous is not None and canonical(previous.value) != canonical(value):
            conflict = f"{previous.source} says {previous.value!r}"
        entries[k] = Entry(value, "server_args", conflict=conflict)
    if format_era:
        entries[f"{engine or 'server'}.format_era"] = Entry(format_era, "log format")
    for var, forced, name, who in forced_variables(engine, entries):
        declared = entries.get(var)
        if declared is None or canonical(declared.value) != canonical(forced):
            note = (f"{declared.source} says {declared.value!r}; " if declared else "") + \
                f"{who} sets it at launch"
            entries[var] = Entry(forced, f"{name} launch", conflict=note)
    for key, value in (log_facts or {}).items():
        value = REDACTED if is_secret_key(key) and value not in (None, "") else value
        previous = entries.get(key)
        conflict = None
        if previous is not None and canonical(previous.value) != canonical(value):
            conflict = (f"{previous.source} says {previous.value!r}; the log shows the value "
                        "in effect")
        entries[key] = Entry(value, "log", conflict=conflict)
    for key, value in (cli_env or {}).items():
        entries[key] = Entry(REDACTED if is_secret_key(key) else value, "command line")
    for key, value in (tags or {}).items():
        entries[f"tag.{key}"] = Entry(value, "command line")
    for key, entry in entries.items():
        entry.tier = tiers.tier(key)
    return env


# -------------------------------------------------------------------------------- diff

@dataclass
class DiffItem:
    key: str
    tier: str
    a: Any
    b: Any
    a_source: str | None
    b_source: str | None


@dataclass
class EnvDiff:
    run_a: str
    run_b: str
    complete_a: bool
    complete_b: bool
    items: list[DiffItem]

    @property
    def identity(self) -> list[DiffItem]:
        return [i for i in self.items if i.tier == "identity"]

    unknown: dict[str, list[str]] = field(default_factory=dict)
    """Per run without a manifest: the identity facts nothing states (a server log never
    gives the GPU, driver, CUDA or package versions; environment variables only where
    NCCL printed them)."""
    known_match: list[str] = field(default_factory=list)
    """Identity keys both runs state, with the same value."""
    missing: dict[str, list[str]] = field(default_factory=dict)
    """Per run with a manifest: the identity facts it does not state (no packages, no
    GPU): the runs are comparable only as far as what is known."""

    def missing_text(self) -> str:
        """``gpu.model, cuda.version unknown in both`` (or per run); empty when none."""
        a, b = self.missing.get(self.run_a, []), self.missing.get(self.run_b, [])
        both = [k for k in a if k in b]
        parts = []
        if both:
            parts.append(", ".join(both) + " unknown in both")
        for run, keys in ((self.run_a, a), (self.run_b, b)):
            only = [k for k in keys if k not in both]
            if only:
                parts.append(", ".join(only) + f" unknown in {run}")
        return "; ".join(parts)

    @property
    def comparable(self) -> bool:
        """True only when both environments are known and their identity tiers match."""
        return self.complete_a and self.complete_b and not self.identity

    @property
    def capacity(self) -> list[DiffItem]:
        return [i for i in self.items if i.tier == "capacity"]

    def identity_keys(self) -> list[str]:
        return [i.key for i in self.identity]


UNSET = "(unset)"
UNKNOWN = "unknown"
FACTS = ("pkg.", "gpu.", "cuda.", "host.", "python.", "torch.", "driver.")
"""Keys that state a fact of the machine (a package version, the GPU): absent, they are
unknown, never unset."""


def _absent(env: RunEnv, key: str) -> str:
    """How a key one run does not have is shown: unknown where the run's environment is
    not fully captured or the key is a fact of the machine; unset otherwise (a variable
    or an argument the launch did not set)."""
    if key.startswith("NCCL_") and "nccl.debug_info" in env.entries:
        return UNSET  # NCCL's INFO lines list the variables set: one they omit is unset
    return UNKNOWN if not env.complete or key.startswith(FACTS) else UNSET


def diff(name_a: str, a: RunEnv, name_b: str, b: RunEnv) -> EnvDiff:
    """Key-by-key differences, identity first, then treatment, then annotation."""
    items = []
    for key in sorted(set(a.entries) | set(b.entries)):
        ea, eb = a.entries.get(key), b.entries.get(key)
        va = ea.value if ea else None
        vb = eb.value if eb else None
        if ea and eb and canonical(va) == canonical(vb):
            continue
        one = ea or eb
        if (ea is None or eb is None) and one is not None and one.source == "log" and not (
                key.startswith("NCCL_") and "nccl.debug_info" in (b if ea else a).entries):
            # one log says it and the other does not: unknown there, not known to differ
            # (an NCCL variable the other run's NCCL INFO lines do not list is unset)
            continue
        tier = (ea or eb).tier  # type: ignore[union-attr]
        items.append(DiffItem(key, tier, va if ea else _absent(a, key),
                              vb if eb else _absent(b, key),
                              ea.source if ea else None, eb.source if eb else None))
    order = {t: i for i, t in enumerate(TIERS)}
    items.sort(key=lambda i: (order.get(i.tier, len(order)), i.key))
    known_match = sorted(k for k in set(a.entries) & set(b.entries)
                         if a.entries[k].tier == "identity"
                         and canonical(a.entries[k].value) == canonical(b.entries[k].value))
    unknown = {name: unknown_identity(env) for name, env in ((name_a, a), (name_b, b))
               if not env.complete}
    missing = {name: _not_stated(env) for name, env in ((name_a, a), (name_b, b))
               if env.complete}
    return EnvDiff(name_a, name_b, a.complete, b.complete, items, unknown, known_match,
                   {k: v for k, v in missing.items() if v})


def _not_stated(env: RunEnv) -> list[str]:
    """The facts of :data:`MANIFEST_IDENTITY_KEYS` ``env`` does not state (the engine's
    package named after the engine whose log format the run has, where it has one)."""
    from logpipe.engines import engines, packages

    out = []
    for key in MANIFEST_IDENTITY_KEYS:
        if key == ENGINE_PACKAGE:
            if not any(f"pkg.{p}" in env.entries for p in packages()):
                own = [e for e in engines() if f"{e.name}.format_era" in env.entries]
                out.append(f"pkg.{own[0].packages[0]}" if own and own[0].packages else key)
        elif key not in env.entries:
            out.append(key)
    return out


def unknown_identity(env: RunEnv) -> list[str]:
    """The identity facts a run without a manifest leaves unknown."""
    out = _not_stated(env)
    if "nccl.debug_info" in env.entries:
        out.append(ENV_VARIABLES + " other than NCCL_* (NCCL_* from the log's NCCL INFO lines)")
    else:
        out.append(ENV_VARIABLES + " (NCCL_*, CUDA_*, SGLANG_*, ...)")
    return out
