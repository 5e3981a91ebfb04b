"""``python -m vllm.collect_env`` and ``python -m torch.utils.collect_env`` reports, read as
environment manifests.

A vLLM log does not say which GPU, driver or torch build ran it; the report users paste
beside it (and into every issue thread) does.  Both reports print ``label: value`` lines
(vLLM pads the label: ``PyTorch version              : 2.8.0``), the GPUs one per line
under ``GPU models and configuration`` (``GPU 0: NVIDIA H100 80GB HBM3``), the packages as
``[pip3] name==version`` / ``[conda] name version …`` lines, and (vLLM only) the
performance-relevant environment variables as ``NAME=value`` lines under ``Environment
Variables``.  :func:`parse` turns a report into the manifest shape ``logpipe env capture``
writes, so that it flattens to the same keys (``gpu.model``, ``gpu.count``, ``gpu.driver``,
``pkg.torch``, ``NCCL_ALGO`` …).

What a report says about CUDA is not what ``cuda.version`` holds (the driver's CUDA, from
``nvidia-smi``): the CUDA torch was built with and the toolkit's ``nvcc`` are kept as
``cuda.torch_build`` and ``cuda.runtime``.  ``Could not collect``, ``N/A`` and ``None`` are
unknown, not values.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from logpipe.errors import InputError

#: file names read as reports: in a run's folder (like ``env.json``) or beside a log
#: (``server.log.collect_env.txt``)
NAMES = ("collect_env.txt",)
SIDECAR_SUFFIX = ".collect_env.txt"

_LABEL = re.compile(r"^(?P<label>[A-Za-z][\w ./()-]*?)\s*:\s?(?P<value>.*)$")
_GPU = re.compile(r"^GPU (?P<index>\d+): (?P<name>.+?)\s*$")
_PIP = re.compile(r"^\[(?:pip\d?|conda)\] (?P<name>[\w.-]+)(?:==| +)(?P<version>\S+)")
_ENV = re.compile(r"^(?P<name>[A-Z_][A-Z0-9_]*)=(?P<value>.*)$")
_UNKNOWN = {"", "could not collect", "n/a", "none", "no cuda", "no hip"}
#: what vLLM sets in every process it starts (``vllm/env_override.py``, 0.32), so its report
#: shows them whether the user set them or not; they say nothing about the run
_VLLM_SETS = {"PYTORCH_NVML_BASED_CUDA_CHECK": "1", "TORCHINDUCTOR_COMPILE_THREADS": "1"}
#: the labels both reports open with; a file needs one of them to be a report
_HEADS = ("PyTorch version", "vLLM Version", "Versions of relevant libraries")


def is_report_name(path: Path) -> bool:
    return path.name in NAMES or path.name.endswith(SIDECAR_SUFFIX)


def _known(value: str) -> str | None:
    value = value.strip()
    return None if value.lower() in _UNKNOWN else value


def parse(text: str, path: Path) -> dict[str, Any]:
    """A report's text → a manifest (see the module docstring).  Raises :class:`InputError`
    naming the file when it is not a report at all."""
    lines = text.replace("\r\n", "\n").split("\n")
    labels: dict[str, str] = {}
    gpus: dict[int, str] = {}
    packages: dict[str, str] = {}
    env: dict[str, str] = {}
    section = ""
    sections: set[str] = set()
    in_gpus = False
    for raw in lines:
        line = raw.rstrip()
        stripped = line.strip()
        if stripped.startswith("=") and set(stripped) == {"="}:
            continue
        gpu = _GPU.match(stripped)
        if in_gpus and gpu:
            gpus[int(gpu["index"])] = gpu["name"]
            continue
        in_gpus = False
        pip = _PIP.match(stripped)
        if pip and _known(stripped.split("]", 1)[1]):
            packages.setdefault(pip["name"].lower(), pip["version"])
            continue
        if section == "Environment Variables":
            var = _ENV.match(stripped)
            if var:
                if _VLLM_SETS.get(var["name"]) != var["value"]:
                    env[var["name"]] = var["value"]
                continue
        if stripped and ":" not in stripped:
            section = stripped  # vLLM's banner titles (and lines no label reads)
            sections.add(section)
            continue
        m = _LABEL.match(stripped)
        if not m:
            continue
        label, value = m["label"].strip(), m["value"]
        labels.setdefault(label, value)
        if label == "GPU models and configuration":
            one = _GPU.match(value.strip())
            if one:
                gpus[int(one["index"])] = one["name"]
            elif _known(value):  # a single GPU named inline (ROCm, macOS), no index
                gpus[0] = value.strip()
            in_gpus = True
    if not any(h in labels for h in _HEADS):
        raise InputError("not a collect_env report (no 'PyTorch version' or 'vLLM Version' "
                         "line)", path=path, line=1,
                         hint="write it with `python -m vllm.collect_env > collect_env.txt`")
    # vLLM's report lists the variables it knows of; torch's lists none, so after a torch
    # report the run's variables are still unknown (not "none set")
    captured = "Environment Variables" in sections
    manifest: dict[str, Any] = {"logpipe_manifest": 1, "manifest_kind": "collect_env",
                                "env_captured": captured}
    if captured:
        manifest["env"] = env
    devices: dict[str, Any] = {}
    driver = _known(labels.get("Nvidia driver version", ""))
    if gpus:
        devices["available"] = True
        devices["devices"] = [{"name": name, "driver": driver}
                              for _, name in sorted(gpus.items())]
    elif (_known(labels.get("Is CUDA available", "")) or "").lower() in ("false", "no"):
        devices["available"] = False
    manifest["gpu"] = devices
    cuda: dict[str, str] = {}
    for label, key in (("CUDA used to build PyTorch", "torch_build"),
                       ("CUDA runtime version", "runtime")):
        value = _known(labels.get(label, ""))
        if value:
            cuda[key] = value
    if cuda:
        manifest["cuda"] = cuda
    torch = _known(labels.get("PyTorch version", ""))
    if torch:
        packages["torch"] = torch  # the running build, over pip's line for it
    vllm = _known(labels.get("vLLM Version", ""))
    if vllm:
        packages.setdefault("vllm", vllm.split(" ")[0].split("@")[0])
    manifest["packages"] = packages
    host: dict[str, str] = {}
    for label, key in (("OS", "os"), ("Python version", "python"),
                       ("Python platform", "platform")):
        value = _known(labels.get(label, ""))
        if value:
            host[key] = value
    manifest["host"] = host
    return manifest


def load(path: Path) -> dict[str, Any]:
    try:
        text = path.read_text(errors="replace")
    except OSError as exc:
        raise InputError(f"cannot read collect_env report: {exc}", path=path) from exc
    return parse(text, path)
