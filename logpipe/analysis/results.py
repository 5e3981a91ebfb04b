"""What a comparison returns: its options, a run's loaded samples, one metric's test and
the comparison with its verdict and exit code (:mod:`logpipe.analysis.compare` makes them)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from logpipe.analysis.client import SERVER_PRIMARY, Bench
from logpipe.analysis.counters import LaunchCounters
from logpipe.analysis.launches import (
    UNREPLICATED,
    LaunchTest,
    Noise,
)
from logpipe.analysis.levels import Level, LevelResult
from logpipe.analysis.pairing import KeyJudgement, Load, Side
from logpipe.analysis.steady import Warmup
from logpipe.analysis.step_phases import Phase, Step
from logpipe.engines import engine_named
from logpipe.env import EnvDiff, RunEnv
from logpipe.sources import load
from logpipe.stats import Test

EXIT_OK, EXIT_REGRESSION, EXIT_ERROR, EXIT_INCOMPARABLE, EXIT_INSUFFICIENT = 0, 1, 2, 3, 4
# when several candidates are compared, the reported exit code is the most severe
SEVERITY = [EXIT_ERROR, EXIT_INCOMPARABLE, EXIT_REGRESSION, EXIT_INSUFFICIENT, EXIT_OK]

DIFFERENT_EXPERIMENT_KEYS = frozenset({
    "arg.model_path", "arg.served_model_name", "arg.tokenizer_path", "arg.tp_size",
    "arg.dp_size", "arg.ep_size", "arg.pp_size", "arg.nnodes", "arg.quantization",
    "arg.dtype", "model"})
"""Keys whose difference makes two runs different experiments, not one experiment in two
environments: a refusal never suggests allowing them."""


KNOWN_MATCH_LISTED = 24
"""Up to this many identity keys known to match are named in a note; more are counted (a
run without a manifest can match hundreds: the list drowned the verdict)."""


@dataclass(frozen=True)
class Options:
    alpha: float = 0.05
    threshold: float = 0.03
    allow_env_diff: frozenset[str] = frozenset()
    allow_unknown_env: bool = False
    allow_profiled: bool = False
    warmup: Warmup = Warmup()
    primary: str | None = None
    """The deciding metric, declared before the data (``--primary``, the plan's
    ``primary``): a client metric's column or ``decode_throughput``; None: the default."""


@dataclass
class RunSamples:
    run_id: str
    name: str
    role: str
    spec_algorithm: str | None
    profiled: bool
    env: RunEnv
    format_era: str | None
    era_mask: int | None
    engine_version: str | None
    decode: dict[int, np.ndarray]
    accept_len: np.ndarray
    accept_rate: np.ndarray
    prefill: np.ndarray
    token_usage: np.ndarray
    graph_on: int
    graph_total: int
    excluded: dict[str, int]
    graphs_off: bool = False
    """Every decode line ran off the graph (graphs disabled, or a device without them):
    those lines are the run's steady state."""
    load: Load = field(default_factory=Load)
    fingerprint: str | None = None
    model: str | None = None
    config_key: str | None = None
    """Every identity, treatment and capacity key with its value, hashed (``run_configs``):
    two launches with the same key and workload are repeats of one configuration."""
    workload: str | None = None
    """The linked benchmark's workload (tool, dataset, rate, concurrency, prompts)."""
    plan: str | None = None
    arm: str | None = None
    round: int | None = None
    """The ``ab`` campaign, arm and round the launch belongs to (its manifest)."""
    steps: tuple[Step, ...] = ()
    """The scheduler steps marked in the launch's profiler traces (``trace_steps``)."""
    engine: str | None = None
    """``runs.engine``: whose log the samples come from."""
    layout: tuple[int | None, ...] = ()
    """``(tp, dp, pp, ep)`` sizes of the launch."""
    bench: Bench = field(default_factory=Bench)
    """The launch's client-side benchmark (its linked ``bench_results``), what users see
    and the one measure every engine shares."""
    profile_window: bool = False
    """A profiler window ran inside the launch's bench (``launch --profile``): its log
    lines outside the window are steady state, its client numbers include the stall."""
    levels: dict[Level, dict[str, float]] = field(default_factory=dict)
    """Each load level its benchmark ran, with the client metrics' medians there
    (:func:`logpipe.analysis.levels.launch_levels`)."""
    counters: LaunchCounters = field(default_factory=lambda: LaunchCounters({}, {}, None))
    """Its engine's counters over its benches (:mod:`logpipe.analysis.counters`)."""

    @property
    def client_disturbed(self) -> bool:
        """A profiler ran during this launch's bench: its client numbers include the
        stall, so they are left out of verdicts (its log outside the window is kept)."""
        return self.profile_window or self.profiled

    def side(self) -> Side:
        return Side(self.name, self.role, self.env, self.load, self.graphs_off, self.engine,
                    self.run_id, self.profiled)

    def accept_rate_definition(self) -> str:
        engine = engine_named(self.engine) if self.engine else None
        if engine is None:
            return "unknown (no engine)"
        if engine.accept_rate is not None:
            return engine.accept_rate
        if engine.accept_rate_by_release is not None:
            return str(load(engine.accept_rate_by_release)(self.engine_version, self.era_mask))
        return "unknown"


@dataclass
class Metric:
    name: str
    unit: str
    higher_is_better: bool | None
    test: Test
    stratum: int | None = None
    gates: bool = True
    """Performance metrics decide the verdict and the exit code; diagnostics (graph
    coverage, token usage, accept length and rate) are reported beside them."""
    family: str = "server"
    """``server`` (the engine's log) or ``client`` (the linked benchmark)."""
    key: str | None = None
    """The deciding-metric name this metric answers to (``decode_throughput``, a client
    metric's column); None for diagnostics."""
    secondary: bool = False
    """Judged, shown, but not the declared deciding metric: it does not set the verdict."""
    launch: LaunchTest | None = None
    """The launch-level test (one value per launch) that decides a performance metric's
    verdict; ``test`` is then the within-launch detail."""

    @property
    def verdict(self) -> str:
        return self.launch.verdict if self.launch is not None else self.test.verdict


@dataclass
class Comparison:
    reference: str
    candidate: str
    reference_id: str
    candidate_id: str
    env_status: str  # same run | comparable | incomparable | unknown | allowed
    env_diff: EnvDiff | None
    allowed_keys: list[str] = field(default_factory=list)
    capacity: list[KeyJudgement] = field(default_factory=list)
    """Capacity keys the runs differ in, each judged against the observed load."""
    profiled: dict[str, bool] = field(default_factory=dict)
    metrics: list[Metric] = field(default_factory=list)
    unmatched_strata: dict[str, list[int]] = field(default_factory=dict)
    speculation: dict[str, Any] | None = None
    excluded: dict[str, dict[str, int]] = field(default_factory=dict)
    verdict: str = ""
    exit_code: int = EXIT_OK
    notes: list[str] = field(default_factory=list)
    options: Options = field(default_factory=Options)
    arms: dict[str, list[str]] = field(default_factory=dict)
    """The launches of each side, reference first, in the order they pair."""
    replication: str = ""
    """How the verdict is replicated: paired rounds, unpaired arms, one launch each
    against the measured launch noise, or unreplicated."""
    same_configuration: bool = False
    """An A/A comparison: no identity, treatment or capacity key differs and the workload
    is the same, so the difference is launch-to-launch variation."""
    noise: dict[int, Noise] = field(default_factory=dict)
    """The environment's measured launch noise per stratum (``launch_noise``)."""
    phases: dict[str, list[Phase]] = field(default_factory=dict)
    """Per side, the time of one marked scheduler step by kind, from its launches'
    profiler traces (``trace_steps``); empty when neither side was traced."""
    primary: str = SERVER_PRIMARY
    """The deciding metric (a client metric's column or ``decode_throughput``)."""
    primary_reason: str = ""
    """Why it decides: declared (``--primary``, the plan) or the default and its ground."""
    client_noise: dict[str, Noise] = field(default_factory=dict)
    """The environment's measured launch noise per client metric."""
    treatment: list[str] = field(default_factory=list)
    """Every key the arms differ in that is the experiment's treatment (tags, arguments,
    allowed environment keys, the workload), as ``key: reference → candidate``."""
    disagreement: str | None = None
    """One line when the server and client families disagree, with the known causes."""
    levels: list[LevelResult] = field(default_factory=list)
    """Per load level every launch benched (two or more): the client's deciding metric
    judged at that level alone."""
    crossover: str | None = None
    """Where the candidate stops paying, from the levels in load order (or why not)."""
    pooled: Any = None
    """The environment's noise without the launches judged (:class:`EnvNoise`): what
    paired rounds pool with."""

    @property
    def unreplicated(self) -> bool:
        return self.replication.startswith(UNREPLICATED)


NO_WARMUP = Warmup()
DEFAULTS = Options()
