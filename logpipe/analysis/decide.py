"""The verdict of a judged comparison: the deciding metric (declared or default primary),
Holm's correction over the server strata, the client's verdict, the launch rule's demand
for evidence, and the disagreement of the two families."""

from __future__ import annotations

from typing import Any

import numpy as np

from logpipe.analysis import client as clients
from logpipe.analysis.client import SERVER_PRIMARY
from logpipe.analysis.launches import (
    MIN_LAUNCH_LINES,
    OUT_OF_FAMILY,
    UNREPLICATED,
    UNREPLICATED_HINT,
    LaunchTest,
)
from logpipe.analysis.results import (
    EXIT_INSUFFICIENT,
    EXIT_OK,
    EXIT_REGRESSION,
    Comparison,
    Metric,
    Options,
    RunSamples,
)
from logpipe.stats import needed_per_run


def _p_of(m: Metric) -> float | None:
    return m.launch.p_value if m.launch is not None else m.test.p_value


def headline_metrics(gating: list[Metric], alpha: float) -> tuple[list[Metric], list[str]]:
    """The gating metrics whose verdict may decide a server-log comparison's, and a note
    for each regression or improvement that may not.  Each metric and stratum is tested
    at α; the headline asks whether anything differs, a family of tests, so it takes them
    through Holm's step-down correction (the smallest p against α/k, the next against
    α/(k−1), ...): five strata at α = 0.05 would otherwise call a difference somewhere in about
    one comparison in five with no effect at all.  A metric without a p-value (judged by
    the practical threshold alone) is not in the family and keeps its verdict."""
    family = sorted((m for m in gating if _p_of(m) is not None),
                    key=lambda m: _p_of(m) or 0.0)
    counted = {id(m) for m in gating if _p_of(m) is None}
    notes: list[str] = []
    stopped = False
    for i, m in enumerate(family):
        p, limit = _p_of(m) or 0.0, alpha / (len(family) - i)
        if not stopped and p < limit:
            counted.add(id(m))
            continue
        stopped = True
        if m.verdict in ("regression", "improvement"):
            where = f" @ {m.stratum} running" if m.stratum is not None else ""
            notes.append(f"{m.name}{where}: {m.verdict} at p = {p:.2g} on its own, not "
                         f"after Holm's correction over the {len(family)} gating tests "
                         f"(needs p < {limit:.2g}): it does not decide the verdict")
    return [m for m in gating if id(m) in counted], notes


def primary_metric(c: Comparison) -> Metric | None:
    """The decode-throughput metric the verdict leads with: the stratum with most lines."""
    decode = [m for m in c.metrics if m.name == "decode throughput"]
    if not decode:
        return None
    return max(decode, key=lambda m: min(m.test.n_a, m.test.n_b))


def speculation_metrics(a: RunSamples, b: RunSamples, c: Comparison) -> None:
    roles = {a.role, b.role}
    if roles != {"speculative", "baseline"}:
        return
    spec, base = (a, b) if a.role == "speculative" else (b, a)
    primary = primary_metric(c)
    block: dict[str, Any] = {
        "speculative_run": spec.name, "baseline_run": base.name,
        "algorithm": spec.spec_algorithm,
        "accept_rate_definition": spec.accept_rate_definition(),
    }
    if primary is not None and primary.test.median_a and primary.test.median_b:
        ref_tps, cand_tps = primary.test.median_a, primary.test.median_b
        typical = primary.launch.typical() if primary.launch is not None and \
            primary.launch.ratio is not None else None
        if typical is not None:  # the typical launch of each arm
            ref_tps, cand_tps = typical
        spec_tps = cand_tps if spec is b else ref_tps
        base_tps = ref_tps if spec is b else cand_tps
        block.update(stratum=primary.stratum, spec_tps=spec_tps, baseline_tps=base_tps,
                     speedup=spec_tps / base_tps - 1)
        if len(spec.accept_len):
            al = float(np.median(spec.accept_len))
            block.update(accept_len=al, break_even_accept_len=al * base_tps / spec_tps)
    block["same_environment"] = c.env_status in ("comparable", "same run")
    block["replication"] = c.replication
    c.speculation = block


def decide(c: Comparison, options: Options) -> None:
    """The verdict of the declared deciding metric; an unreplicated regression exits 4."""
    if c.primary == SERVER_PRIMARY:
        _server_verdict(c, options)
    else:
        _client_verdict(c, options)
    deciding = deciding_metric(c)
    if deciding is not None and deciding.launch is not None:
        if deciding.launch.method.endswith("environment noise"):
            c.replication += f"; {deciding.launch.pooled}"
    exit_needs_evidence(c, deciding)


def exit_needs_evidence(c: Comparison, deciding: Metric | None) -> None:
    """A regression that rests only on unreplicated launch tests (one launch each, no
    launch noise measured) is reported with its size and exits 4, not 1."""
    if c.verdict != "regression" or not _unreplicated(c):
        return
    size = (f"{(deciding.launch.ratio - 1) * 100:+.1f}%" if deciding is not None
            and deciding.launch is not None and deciding.launch.ratio else "a drop")
    c.verdict, c.exit_code = "unreplicated regression", EXIT_INSUFFICIENT
    c.notes.insert(0, f"unreplicated: {size} ({metric_name(deciding)}) from one launch "
                      "each, with no launch noise measured for this environment: "
                      "inconclusive, not a regression (exit 4). "
                      f"{UNREPLICATED_HINT[0].upper()}{UNREPLICATED_HINT[1:]}")


def _unreplicated(c: Comparison) -> bool:
    """The regression rests only on unreplicated launch tests (one launch each, no noise)."""
    deciding = [m for m in c.metrics if m.gates and not m.secondary
                and m.higher_is_better is not None and m.verdict == "regression"]
    return bool(deciding) and all(m.launch is None or m.launch.method == "unreplicated"
                                  for m in deciding)


def metric_name(m: Metric | None) -> str:
    if m is None:
        return "no metric"
    where = f" @ {m.stratum} running" if m.stratum is not None else ""
    if m.family == "counters":  # its names say so: "output throughput (counters)"
        return f"{m.name}{where}"
    return f"{m.family} {m.name}{where}"


def deciding_metric(c: Comparison) -> Metric | None:
    """The metric that sets the verdict: the declared client metric, or the server's
    decode throughput at its best-populated stratum."""
    if c.primary == SERVER_PRIMARY:
        return primary_metric(c)
    return next((m for m in c.metrics if m.family in ("client", "counters")
                 and m.key == c.primary), None)


def _client_verdict(c: Comparison, options: Options) -> None:
    m = deciding_metric(c)
    label = clients.metric_label(c.primary)
    if m is None or m.launch is None or m.verdict == "insufficient data":
        c.verdict, c.exit_code = "insufficient data", EXIT_INSUFFICIENT
        if m is not None and m.launch is not None and m.launch.label == OUT_OF_FAMILY:
            c.notes.append(f"the deciding metric, {label}, cannot decide: {m.launch.detail}")
            return
        c.notes.append(f"the deciding metric, {label}, has no value in "
                       + ("the launches of both arms" if m is None else m.launch.detail
                          if m.launch is not None else "every launch")
                       + " (declare another with --primary)")
        return
    c.replication = _client_replication(m.launch, c, m.family)
    if c.same_configuration:
        _same_configuration(c, m, [x for x in c.metrics if x.launch is not None])
        return
    c.verdict = m.verdict
    c.exit_code = EXIT_REGRESSION if m.verdict == "regression" else EXIT_OK
    if m.launch.disagreeing:
        c.notes.append(f"{label}: {m.launch.disagreeing}")


def _client_replication(t: LaunchTest, c: Comparison, family: str = "client") -> str:
    ka, kb = t.launches
    if t.method.startswith("paired rounds"):
        what = "client values" if family == "client" else "counted values"
        return (f"{ka} rounds, paired: verdict on the per-round ratios of the launches' "
                f"{what} (Student t)")
    if t.method == "welch":
        return f"unpaired arms of {ka} and {kb} launches: Welch on per-launch log values"
    if t.method == "launch noise":
        noise = c.client_noise.get(c.primary)
        return ("one launch per arm: judged against this environment's launch noise, "
                f"measured on {noise.pairs if noise else '?'} A/A pair(s)")
    return f"{UNREPLICATED} ({UNREPLICATED_HINT})"


def _same_configuration(c: Comparison, deciding: Metric | None, gating: list[Metric]) -> None:
    """An A/A pair: launch noise, never a regression or an improvement."""
    ratio = deciding.launch.ratio if deciding and deciding.launch else None
    size = f"{(ratio - 1) * 100:+.1f}%" if ratio is not None else "unknown"
    c.verdict = "same configuration"
    c.exit_code = EXIT_OK
    c.replication = ("A/A: launches of one configuration (no identity, treatment or "
                     "capacity key differs, same workload)")
    for m in gating:
        if m.launch is not None:
            m.launch.verdict = "launch noise"
            m.launch.detail = "A/A: the difference is launch-to-launch variation"
    where = (f" at {deciding.stratum} running" if deciding is not None
             and deciding.stratum is not None else
             f" in {metric_name(deciding)}" if deciding is not None else "")
    c.notes.insert(0, f"same configuration: the difference, {size}{where}, is "
                      "launch-to-launch variation (an A/A pair feeds the launch_noise "
                      "view; it is never a regression or an improvement)")
    if deciding is None:
        return
    measured = (c.noise.get(deciding.stratum) if deciding.stratum is not None
                else c.client_noise.get(deciding.key or ""))
    if measured is not None and ratio is not None and measured.log_sd > 0:
        z = abs(np.log(ratio)) / (measured.log_sd * np.sqrt(2))
        if z > 3:
            c.notes.insert(1, f"the difference is {z:.1f}× the spread of two launches "
                              f"({measured.describe()}): if something not recorded "
                              "differs (a code change), tag the launches (`--tag "
                              "build=...`) so they are compared as different")


def _server_verdict(c: Comparison, options: Options) -> None:
    gating = [m for m in c.metrics if m.gates and m.higher_is_better is not None
              and not m.secondary]
    counted, uncounted = headline_metrics(gating, options.alpha)
    regressions = [m for m in counted if m.verdict == "regression"]
    decode = [m for m in c.metrics if m.name == "decode throughput"]
    if not decode:
        c.verdict = "insufficient data"
        c.exit_code = EXIT_INSUFFICIENT
        strata = c.unmatched_strata
        c.notes.append("no concurrency stratum (running requests) has steady decode lines in "
                       "both runs" + ("; unmatched: " + "; ".join(
                           f"{k}: {v}" for k, v in strata.items() if v) if any(
                           strata.values()) else ""))
        return
    if not regressions and all(m.verdict == "insufficient data" for m in decode):
        c.verdict = "insufficient data"
        c.exit_code = EXIT_INSUFFICIENT
        strays = [m for m in decode if m.launch is not None and m.launch.label == OUT_OF_FAMILY]
        if strays:
            c.notes.append(f"{strays[0].name} @ {strays[0].stratum} running cannot decide: "
                           f"{strays[0].launch.detail}")  # type: ignore[union-attr]
            return
        c.notes.append(f"need ≥ {needed_per_run(options.alpha)} steady decode lines per run "
                       f"in a shared stratum for α = {options.alpha:g} (and ≥ "
                       f"{MIN_LAUNCH_LINES} for a launch's median to count)")
        return
    if c.same_configuration:
        _same_configuration(c, primary_metric(c),
                            [m for m in c.metrics if m.gates and m.higher_is_better is not None])
        return
    if regressions:
        c.verdict = "regression"
        c.exit_code = EXIT_REGRESSION
    else:
        c.verdict = ("improvement" if any(m.verdict == "improvement" for m in counted)
                     else "no significant change")
        c.exit_code = EXIT_OK
    c.notes.extend(uncounted)
    for m in decode:
        if m.launch is not None and m.launch.disagreeing:
            c.notes.append(f"@{m.stratum} running: {m.launch.disagreeing}")


def disagreement(ref: list[RunSamples], cand: list[RunSamples], c: Comparison,
                  options: Options) -> None:
    """One line when the server log and the client's benchmark disagree: in sign, or by
    more than their launch noise; with the known causes that apply."""
    if c.same_configuration:
        return  # an A/A pair's two families are two views of launch noise
    server = primary_metric(c)
    client = next((m for m in c.metrics if m.family == "client"
                   and m.key == clients.DEFAULT_CLIENT_PRIMARY), None)
    if server is None or client is None or server.launch is None or client.launch is None:
        return
    rs, rc = server.launch.ratio, client.launch.ratio
    if not rs or not rc:
        return
    ns, nc = c.noise.get(server.stratum or -1), c.client_noise.get(client.key or "")
    k = max(1, min(len(ref), len(cand)))
    spread = (float(np.sqrt((ns.log_sd ** 2 + nc.log_sd ** 2) * 2 / k))
              if ns is not None and nc is not None else None)
    if not clients.disagree(rs, rc, options.threshold, spread):
        return
    typical = client.launch.typical()
    seen = (f" ({typical[0]:.1f} → {typical[1]:.1f} {client.unit})" if typical else "")
    causes = clients.disagreement_causes(ref, cand)
    c.disagreement = (
        f"server and client disagree: the server log says {(rs - 1) * 100:+.1f}% (decode "
        f"throughput @ {server.stratum} running) while the client saw {rc:.2f}x output "
        f"throughput{seen}; "
        + ("known causes that apply: " + "; ".join(causes) if causes else
           "no known cause applies (profiler window, cold launch, failed requests, "
           "workload, bench client): look at what the log's steady state leaves out"))
