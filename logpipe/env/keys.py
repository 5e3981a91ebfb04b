"""The vocabulary of an environment: tiers, the facts a manifest states, the variables and
packages captured whatever the engine, manifest file names."""

from __future__ import annotations

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
