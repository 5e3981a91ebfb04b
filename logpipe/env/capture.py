"""Capture an environment: GPUs, packages (of the interpreter that runs the server), the
variables engines and their libraries read, the launch command (secrets redacted)."""

from __future__ import annotations

import json
import os
import platform
import shlex
import shutil
import socket
import subprocess
import sys
from collections.abc import Mapping
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from typing import Any

from logpipe.env.keys import MANIFEST_VERSION, REDACTED, capture_prefixes, packages
from logpipe.redaction import is_secret_key

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
