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

Rooms: :mod:`.keys` (the vocabulary), :mod:`.capture`, :mod:`.manifests`, :mod:`.tiers`,
:mod:`.model` (build, fingerprint) and :mod:`.diff`; every public name is importable from
here.
"""

from __future__ import annotations

from logpipe.env.capture import (
    ARG_ALIASES,
    capture,
    interpreter_of,
    launch_args,
    packages_of,
    redact_command,
    redact_mapping,
)
from logpipe.env.diff import (
    FACTS,
    UNKNOWN,
    UNSET,
    DiffItem,
    EnvDiff,
    diff,
    unknown_identity,
)
from logpipe.env.keys import (
    CAPTURE_PREFIXES,
    ENGINE_PACKAGE,
    ENV_VARIABLES,
    MANIFEST_IDENTITY_KEYS,
    MANIFEST_NAMES,
    MANIFEST_VERSION,
    PACKAGES,
    REDACTED,
    SIDECAR_SUFFIX,
    TIERS,
    capture_prefixes,
    packages,
)
from logpipe.env.manifests import (
    discover,
    flatten_manifest,
    is_manifest_name,
    load_manifest,
)
from logpipe.env.model import (
    CAPACITY_FACTS,
    Entry,
    LaunchLayers,
    Rendered,
    RunEnv,
    build_env,
    canonical,
    fingerprint,
    forced_variables,
    launch_layers,
    log_facts,
    render,
    with_run_facts,
)
from logpipe.env.tiers import (
    Tiers,
)

__all__ = [
    "ARG_ALIASES",
    "CAPACITY_FACTS",
    "CAPTURE_PREFIXES",
    "DiffItem",
    "ENGINE_PACKAGE",
    "ENV_VARIABLES",
    "Entry",
    "EnvDiff",
    "FACTS",
    "LaunchLayers",
    "MANIFEST_IDENTITY_KEYS",
    "MANIFEST_NAMES",
    "MANIFEST_VERSION",
    "PACKAGES",
    "REDACTED",
    "Rendered",
    "RunEnv",
    "SIDECAR_SUFFIX",
    "TIERS",
    "Tiers",
    "UNKNOWN",
    "UNSET",
    "build_env",
    "canonical",
    "capture",
    "capture_prefixes",
    "diff",
    "discover",
    "fingerprint",
    "flatten_manifest",
    "forced_variables",
    "interpreter_of",
    "is_manifest_name",
    "launch_args",
    "launch_layers",
    "load_manifest",
    "log_facts",
    "packages",
    "packages_of",
    "redact_command",
    "redact_mapping",
    "render",
    "unknown_identity",
    "with_run_facts",
]
