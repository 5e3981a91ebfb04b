"""Manifests on disk: read one, flatten it to keys, find those that describe a log (its
sidecar, ``env.json`` up to the ingest root, a ``collect_env`` report)."""

from __future__ import annotations

import json
import shlex
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from logpipe import collect_env
from logpipe.env.capture import redact_command
from logpipe.env.keys import MANIFEST_NAMES, REDACTED, SIDECAR_SUFFIX
from logpipe.errors import InputError
from logpipe.redaction import is_secret_key

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
