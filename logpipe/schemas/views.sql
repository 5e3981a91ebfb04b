-- Views, recreated on every open for writing (they hold no data).  Documented in
-- schemas/README.md.

-- Every batch line with its steady-state class and the reason for it.
--   warmup   : before the server was ready, or a decode line off the graph in a run that
--              does run graphs (a run whose decode lines are all off the graph, e.g.
--              --disable-cuda-graph, the torch-native backend or CPU, has graphs off:
--              its off-graph lines are its steady state)
--   profiled : between a profiler start and stop
--   idle     : a decode line with no running requests
--   steady   : everything else, except the first decode line after an idle gap, which
--              is 'warmup' (its throughput window includes the idle time)
--
-- run_batch_states(run_id) is the same for one run (NULL: every run); the filter sits
-- before the window functions, so one run of a large database is classified alone.
-- run_samples(rid): the per-interval samples every rule below reads, in one shape, for
-- the run `rid` (NULL: every run).  Each engine brings its fragment (`Engine.samples_sql`:
-- SGLang's batch lines as they are, vLLM's stats lines as windows); the store joins them
-- with UNION ALL where the marker below stands.  running_req is the load level the rules
-- stratify by, running_now the count the line prints.
-- The `_in(rid, ids)` forms are the same for the run `rid` or the runs of the list
-- `ids` (both NULL: every run): ingest classifies the runs it changed in one pass.
-- in_runs: the run `rid` by equality, the list by a semi-join, each test on its own side of
-- an AND: the run's equality is then pushed into the scans (1 ms, not a scan of every
-- line) and a NULL list folds away; `list_contains` or an OR of the two was tested item
-- by item on every row right after an ingest's writes (5 s for 1,600 runs of 5 M lines).
CREATE OR REPLACE MACRO in_runs(run_id, rid, ids) AS
    (rid IS NULL OR run_id = rid) AND (ids IS NULL OR run_id IN (SELECT unnest(ids::VARCHAR[])));

CREATE OR REPLACE MACRO run_samples_in(rid, ids) AS TABLE
-- @engine_samples
;

CREATE OR REPLACE MACRO run_samples(rid) AS TABLE SELECT * FROM run_samples_in(rid, NULL);

CREATE OR REPLACE MACRO run_batch_states_in(rid, ids) AS TABLE
WITH ready AS (
    SELECT run_id, min(line_no) AS ready_line
    FROM events WHERE kind = 'ready' AND in_runs(run_id, rid, ids) GROUP BY run_id
),
prof AS (
    SELECT s.run_id, s.line_no AS start_line,
           coalesce((SELECT min(e.line_no) FROM events e
                     WHERE e.run_id = s.run_id AND e.kind = 'profiling_stop'
                       AND e.line_no > s.line_no), 9223372036854775807) AS stop_line
    FROM events s WHERE s.kind = 'profiling_start' AND in_runs(s.run_id, rid, ids)
),
-- a run's profiled spans as one list (few runs have any: a line is tested against its
-- run's list, not joined with every span)
profs AS (SELECT run_id, list([start_line, stop_line]) AS spans FROM prof GROUP BY run_id),
graphs AS (
    SELECT run_id, bool_or(cuda_graph) AS runs_graphs,
           min(line_no) FILTER (WHERE cuda_graph) AS first_graph_line
    FROM run_samples_in(rid, ids) WHERE kind = 'decode' GROUP BY run_id
),
b AS (
    SELECT b.*,
           b.kind IN ('decode', 'window') AS is_decode,
           lag(b.kind) OVER w AS prev_kind,
           lag(b.running_req) OVER w AS prev_running,
           lead(b.running_req) OVER w AS next_running,
           last_value(CASE WHEN b.kind IN ('decode', 'window') THEN b.ts END IGNORE NULLS)
             OVER before AS prev_decode_ts,
           last_value(CASE WHEN b.kind IN ('decode', 'window') THEN b.line_no END
                      IGNORE NULLS) OVER before AS prev_decode_line,
           last_value(b.ts IGNORE NULLS) OVER before AS prev_ts
    FROM run_samples_in(rid, ids) b
    WINDOW w AS (PARTITION BY b.run_id, coalesce(b.rank_tag, '') ORDER BY b.line_no, b.ts),
           before AS (w ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING)
),
gaps AS (
    SELECT run_id, coalesce(rank_tag, '') AS rank_key,
           median(epoch(ts) - epoch(prev_decode_ts)) AS median_gap_s
    FROM b WHERE is_decode AND prev_decode_ts IS NOT NULL
    GROUP BY ALL
)
-- the reason a line is not steady (NULL: steady), and its state from the reason: the
-- tests in the order above, each once
SELECT run_id, source_path, line_no, ts, kind, rank_tag, running_req, queue_req,
       gen_throughput, input_throughput, accept_len, accept_rate, token_usage, cuda_graph,
       CASE reason
         WHEN 'before the server was ready' THEN 'warmup'
         WHEN 'inside a profiled interval' THEN 'profiled'
         WHEN 'no running requests' THEN 'idle'
         ELSE CASE WHEN reason IS NULL THEN 'steady' ELSE 'warmup' END
       END AS state,
       reason, ts_step_s, past_warmup
FROM (
    SELECT b.run_id, b.source_path, b.line_no, b.ts, b.kind, b.rank_tag, b.running_req,
           b.queue_req, b.gen_throughput, b.input_throughput, b.accept_len, b.accept_rate,
           b.token_usage, b.cuda_graph,
           CASE
             WHEN r.ready_line IS NOT NULL AND b.line_no < r.ready_line
               THEN 'before the server was ready'
             WHEN p.spans IS NOT NULL
                  AND len(list_filter(p.spans, lambda s: b.line_no > s[1]
                                                         AND b.line_no < s[2])) > 0
               THEN 'inside a profiled interval'
             WHEN b.is_decode AND b.running_req = 0 THEN 'no running requests'
             WHEN b.kind = 'decode' AND b.cuda_graph = false AND gr.runs_graphs
               THEN 'decode ran off the graph'
             WHEN b.kind = 'decode' AND b.prev_decode_line IS NULL THEN 'first decode line'
             WHEN b.kind = 'window' AND b.prev_decode_line IS NULL
               THEN 'first stats window (its interval includes the start of the load)'
             WHEN b.kind = 'decode' AND b.prev_kind = 'prefill' AND b.prev_running = 0
               THEN 'first decode after idle (window includes the idle time)'
             WHEN b.kind = 'window' AND b.prev_running = 0
               THEN 'first stats window after idle (its interval includes idle time)'
             WHEN b.kind = 'window' AND coalesce(b.next_running, 0) = 0
               THEN 'last stats window before idle (its requests ended inside it)'
             WHEN b.is_decode AND g.median_gap_s > 0
                  AND epoch(b.ts) - epoch(b.prev_decode_ts) > 3 * g.median_gap_s
               THEN 'first decode after a gap (window includes the idle time)'
             ELSE NULL
           END AS reason,
           epoch(b.ts) - epoch(b.prev_ts) AS ts_step_s,
           -- the lines graph coverage is computed on: decode lines after the server was
           -- ready and after the run's first decode on the graph, with requests running
           b.is_decode AND coalesce(b.running_req, 1) > 0
             AND (r.ready_line IS NULL OR b.line_no >= r.ready_line)
             AND (gr.first_graph_line IS NULL OR b.line_no >= gr.first_graph_line)
             AS past_warmup
    FROM b
    LEFT JOIN ready r ON r.run_id = b.run_id
    LEFT JOIN profs p ON p.run_id = b.run_id
    LEFT JOIN graphs gr ON gr.run_id = b.run_id
    LEFT JOIN gaps g ON g.run_id = b.run_id AND g.rank_key = coalesce(b.rank_tag, '')
);

CREATE OR REPLACE MACRO run_batch_states(rid) AS TABLE
SELECT * FROM run_batch_states_in(rid, NULL);

CREATE OR REPLACE VIEW batch_states AS SELECT * FROM run_batch_states(NULL);

-- Per-interval server samples in terms every engine can fill: one row per periodic stats
-- line of a server log (SGLang: its Decode/Prefill batch lines, whose detail stays in
-- `batches`; vLLM: its stats lines, kind 'window', detail in `vllm_stats`), with the
-- engine of the run.
CREATE OR REPLACE VIEW server_samples AS
SELECT b.run_id, r.engine, b.source_path, b.line_no, b.ts, b.kind,
       b.running_now AS running, b.queue_req AS waiting, b.token_usage AS kv_usage,
       b.input_throughput AS prompt_tps, b.gen_throughput AS gen_tps, b.accept_len,
       b.accept_rate, b.cuda_graph
FROM run_samples(NULL) b JOIN runs r USING (run_id);

-- Steady decode samples only.
CREATE OR REPLACE VIEW steady_decode AS
SELECT * FROM batch_states WHERE kind IN ('decode', 'window') AND state = 'steady';

-- A run's batch lines as judging and the statistics below read them (NULL: every run),
-- counted instead of listed: one row per series, stratum, value and label with how many
-- lines have it (`n`).  A run of a million batch lines is a few thousand rows here
-- (throughputs are printed to two decimals); compare rebuilds its samples from them, and
-- run_summary_stats and launch_values are computed from them.  Ingest keeps them per run
-- in run_judged_cache (internal), so that no read command classifies a run's lines again.
--   lines        every line: label its kind, stratum 1 when steady
--   decode       steady decode lines: stratum running_req, value gen_throughput
--   accept_len, accept_rate, token_usage   steady decode lines, value not NULL
--   prefill      steady prefill lines: value input_throughput, not NULL
--   graph        decode lines that say whether they ran on the graph: stratum 1 for
--                those graph coverage counts (past_warmup), value 1 on the graph
--   excluded     lines that are not steady: label the reason
--   ts_step      one row: value the smallest ts_step_s, n every line
CREATE OR REPLACE MACRO run_judged_counts_in(rid, ids) AS TABLE
WITH s AS MATERIALIZED (
    SELECT run_id, kind IN ('decode', 'window') AS is_decode, kind, state, reason,
           running_req, gen_throughput, input_throughput, accept_len, accept_rate,
           token_usage, cuda_graph, past_warmup, ts_step_s
    FROM run_batch_states_in(rid, ids)
),
sd AS (SELECT * FROM s WHERE is_decode AND state = 'steady')
SELECT run_id, 'lines' AS series, (state = 'steady')::BIGINT AS stratum, NULL::DOUBLE AS value,
       kind AS label, count(*) AS n
FROM s GROUP BY ALL
UNION ALL
SELECT run_id, 'decode', running_req, gen_throughput, NULL, count(*) FROM sd GROUP BY ALL
UNION ALL
SELECT run_id, 'accept_len', NULL, accept_len, NULL, count(*)
FROM sd WHERE accept_len IS NOT NULL GROUP BY ALL
UNION ALL
SELECT run_id, 'accept_rate', NULL, accept_rate, NULL, count(*)
FROM sd WHERE accept_rate IS NOT NULL GROUP BY ALL
UNION ALL
SELECT run_id, 'token_usage', NULL, token_usage, NULL, count(*)
FROM sd WHERE token_usage IS NOT NULL GROUP BY ALL
UNION ALL
SELECT run_id, 'prefill', NULL, input_throughput, NULL, count(*)
FROM s WHERE kind = 'prefill' AND state = 'steady' AND input_throughput IS NOT NULL
GROUP BY ALL
UNION ALL
SELECT run_id, 'graph', coalesce(past_warmup, false)::BIGINT, cuda_graph::DOUBLE, NULL,
       count(*)
FROM s WHERE is_decode AND cuda_graph IS NOT NULL GROUP BY ALL
UNION ALL
SELECT run_id, 'excluded', NULL, NULL, reason, count(*)
FROM s WHERE state <> 'steady' GROUP BY ALL
UNION ALL
SELECT run_id, 'ts_step', NULL, min(ts_step_s), NULL, count(*) FROM s GROUP BY ALL;

CREATE OR REPLACE MACRO run_judged_counts(rid) AS TABLE
SELECT * FROM run_judged_counts_in(rid, NULL);

-- The same counts, computed now for the run `rid` (NULL: every run) where `ids` is NULL,
-- else those ingest kept for the runs `ids` (a list; the caller has made sure they are
-- current, logpipe.summaries).
CREATE OR REPLACE MACRO judged_counts_of(rid, ids) AS TABLE
SELECT run_id, series, stratum, value, label, n FROM run_judged_counts(rid) WHERE ids IS NULL
UNION ALL
SELECT run_id, series, stratum, value, label, n FROM logpipe_internal.run_judged_cache
WHERE run_id IN (SELECT unnest(ids));

-- The steady-state statistics of one run (NULL: of every run), one row per run with
-- batch lines; run_summary adds the runs without any.  One steady throughput per launch:
-- steady_gen_throughput is the median at the run's steady stratum (steady_stratum, the
-- running-request level with the most steady decode lines; the higher level on a tie),
-- the value compare, check, ab, sweep, the report and bench_vs_log name with its stratum.
-- A run whose lines carry no running-request count gets the median of all its steady
-- decode lines and no stratum.
-- Computed from run_judged_counts (run_summary_stats_of(NULL, ids): from the counts
-- ingest kept for the runs `ids`).
CREATE OR REPLACE MACRO run_summary_stats_of(rid, ids) AS TABLE
WITH c AS MATERIALIZED (SELECT * FROM judged_counts_of(rid, ids)),
lead AS (
    SELECT run_id, stratum AS steady_stratum
    FROM c WHERE series = 'decode' AND stratum IS NOT NULL AND value IS NOT NULL
    GROUP BY run_id, stratum
    QUALIFY row_number() OVER (PARTITION BY run_id ORDER BY sum(n) DESC, stratum DESC) = 1
),
-- medians of the lines themselves (each counted value repeated n times): what median()
-- of the lines gives
med AS (
    SELECT c.run_id,
           median(c.value) FILTER (WHERE c.series = 'decode'
                                   AND c.stratum = l.steady_stratum) AS stratum_tps,
           median(c.value) FILTER (WHERE c.series = 'decode') AS all_tps,
           median(c.value) FILTER (WHERE c.series = 'accept_len') AS accept_len
    FROM (SELECT *, unnest(range(n)) FROM c
          WHERE series IN ('decode', 'accept_len') AND value IS NOT NULL) c
    LEFT JOIN lead l ON l.run_id = c.run_id
    GROUP BY c.run_id
)
SELECT c.run_id,
       coalesce(sum(c.n) FILTER (WHERE c.series = 'lines'
                                 AND c.label IN ('decode', 'window')), 0) AS decode_lines,
       coalesce(sum(c.n) FILTER (WHERE c.series = 'lines' AND c.stratum = 1
                                 AND c.label IN ('decode', 'window')), 0)
         AS steady_decode_lines,
       coalesce(any_value(m.stratum_tps), any_value(m.all_tps)) AS steady_gen_throughput,
       any_value(m.accept_len) AS steady_accept_len,
       sum(c.value * c.n) FILTER (WHERE c.series = 'graph' AND c.stratum = 1)
         / sum(c.n) FILTER (WHERE c.series = 'graph' AND c.stratum = 1) AS graph_coverage,
       list_sort(list_distinct(list(c.stratum) FILTER (WHERE c.series = 'decode')))
         AS strata,
       min(c.value) FILTER (WHERE c.series = 'ts_step') AS min_ts_step_s,
       any_value(l.steady_stratum) AS steady_stratum
FROM c LEFT JOIN lead l ON l.run_id = c.run_id LEFT JOIN med m ON m.run_id = c.run_id
GROUP BY c.run_id;

CREATE OR REPLACE MACRO run_summary_stats(rid) AS TABLE
SELECT * FROM run_summary_stats_of(rid, NULL);

-- Per run, in one pass over its batch lines: how many, a hash over them (what the per-run
-- caches are keyed by) and the range of each value (what the data-quality checks test).
-- run_batch_ranges_of(paths, afters) is the same over the lines of the source files
-- `paths`, each past its line in `afters` (NULL, NULL: every line): ingest folds the new
-- lines of the files it read into run_batch_ranges_cache with it, in one pass (counts and
-- hash sums add up, minima and maxima combine).
CREATE OR REPLACE MACRO run_batch_ranges_of(paths, afters) AS TABLE
SELECT run_id, count(*) AS batch_lines,
       sum(hash(line_no, ts, kind, rank_tag, running_req, cuda_graph, gen_throughput,
                input_throughput, accept_len, accept_rate, token_usage)) AS lines_hash,
       min(token_usage) AS min_token_usage, max(token_usage) AS max_token_usage,
       min(accept_len) AS min_accept_len, max(accept_len) AS max_accept_len,
       min(gen_throughput) AS min_gen_throughput,
       min(input_throughput) AS min_input_throughput
FROM run_samples(NULL)
WHERE paths IS NULL
   OR line_no > afters[list_position(paths, source_path)]
GROUP BY run_id;

CREATE OR REPLACE VIEW run_batch_ranges AS SELECT * FROM run_batch_ranges_of(NULL, NULL);

-- What a run's statistics are computed from, as one key per run: its batch lines and the
-- events that bound its steady state (ready, profiling start/stop).
-- run_data_keys_of(kept): the same from the ranges ingest kept (`kept` true: a read of a
-- few hundred rows instead of every batch line; what ingest compares after folding the
-- ranges of every file written since the last ingest ended) or from the lines (false).
CREATE OR REPLACE MACRO run_data_keys_of(kept) AS TABLE
SELECT r.run_id,
       concat_ws('|', coalesce(b.batch_lines, 0), b.lines_hash, coalesce(e.n, 0), e.h)
         AS data_key
FROM runs r
LEFT JOIN (SELECT * FROM run_batch_ranges WHERE NOT kept
           UNION ALL
           SELECT * FROM logpipe_internal.run_batch_ranges_cache WHERE kept) b USING (run_id)
LEFT JOIN (SELECT run_id, count(*) AS n, sum(hash(line_no, kind)) AS h FROM events
           WHERE kind IN ('ready', 'profiling_start', 'profiling_stop')
           GROUP BY run_id) e USING (run_id);

CREATE OR REPLACE VIEW run_data_keys AS SELECT * FROM run_data_keys_of(false);

-- One row per run: what the log says about its steady state.
CREATE OR REPLACE VIEW run_summary AS
SELECT r.run_id, r.name, r.model, r.tp_size, r.dp_size, r.ep_size, r.pp_size,
       r.spec_algorithm, r.role, r.env_fingerprint, r.env_complete, r.profiled,
       r.format_era, r.started_at,
       coalesce(s.decode_lines, 0) AS decode_lines,
       coalesce(s.steady_decode_lines, 0) AS steady_decode_lines,
       s.steady_gen_throughput, s.steady_accept_len, s.graph_coverage, s.strata,
       s.min_ts_step_s, s.steady_stratum
FROM runs r LEFT JOIN run_summary_stats(NULL) s USING (run_id);

-- The launch is the unit (statistics.md §2b): one value per launch and stratum, the
-- steady median decode throughput of the launch at that running-request level, where the
-- launch has at least 3 steady decode lines there (logpipe.launches.MIN_LAUNCH_LINES).
-- launch_values_of(rid) is the same for one run (NULL: every run); computed from
-- run_judged_counts (launch_values_of_counts(NULL, ids): from what ingest kept).
CREATE OR REPLACE MACRO launch_values_of_counts(rid, ids) AS TABLE
SELECT run_id, stratum, count(*) AS lines, median(value) AS steady_tps
FROM (SELECT *, unnest(range(n)) FROM judged_counts_of(rid, ids)
      WHERE series = 'decode' AND value > 0 AND stratum IS NOT NULL)
GROUP BY ALL
HAVING count(*) >= 3;

CREATE OR REPLACE MACRO launch_values_of(rid) AS TABLE
SELECT * FROM launch_values_of_counts(rid, NULL);

CREATE OR REPLACE VIEW launch_values AS SELECT * FROM launch_values_of(NULL);

-- What a launch ran, as one key: every identity, treatment and capacity key with its
-- value, and the user's tags (annotation keys -- ports, paths, clocks, plan and round
-- names -- left out), and
-- the workload of its benchmark (tool, dataset, request rate, concurrency, prompts) where
-- one is linked.  Two launches with the same fingerprint, model, config_key and workload
-- are repeats of one configuration: an A/A pair.
-- run_configs_of(rid, ids): the same for the run `rid` or the runs of the list `ids` (both
-- NULL: every run), their environments aggregated alone (the view's aggregate of every
-- run's was 0.2 s of each read on a database of 1,586 launches).
CREATE OR REPLACE MACRO run_configs_of(rid, ids) AS TABLE
WITH cfg AS (
    SELECT run_id,
           md5(coalesce(string_agg(key || '=' || coalesce(value, 'null'), chr(10)
                                   ORDER BY key) FILTER (WHERE tier <> 'annotation'
                                                         OR key LIKE 'tag.%'), ''))
             AS config_key
    FROM run_env WHERE in_runs(run_id, rid, ids) GROUP BY run_id
),
wl AS (
    SELECT run_id,
           -- in a fixed order: a launch benched at several load levels is one workload
           string_agg(DISTINCT concat_ws('/', tool, dataset_name, request_rate,
                                         max_concurrency, num_prompts), '; '
                      ORDER BY concat_ws('/', tool, dataset_name, request_rate,
                                         max_concurrency, num_prompts)) AS workload
    FROM bench_results WHERE duplicate_of IS NULL AND run_id IS NOT NULL
                         AND in_runs(run_id, rid, ids) GROUP BY run_id
)
SELECT r.run_id, r.name, r.env_fingerprint, r.model, r.env_complete, r.profiled,
       coalesce(c.config_key, md5('')) AS config_key,
       -- and the bench command a launch recorded (another --seed: other prompts)
       CASE WHEN b.value IS NULL THEN w.workload
            ELSE concat_ws(' | ', w.workload, b.value) END AS workload
FROM runs r LEFT JOIN cfg c USING (run_id) LEFT JOIN wl w USING (run_id)
LEFT JOIN run_env b ON b.run_id = r.run_id AND b.key = 'launch.bench'
WHERE in_runs(r.run_id, rid, ids);

CREATE OR REPLACE VIEW run_configs AS SELECT * FROM run_configs_of(NULL, NULL);

-- The measured launch-to-launch noise of an environment: per fingerprint, model and
-- stratum, the pooled standard deviation of log per-launch medians over every group of
-- repeat launches of one configuration and workload (A/A pairs; ab's baseline rounds are
-- such a group).  Launches with an unknown environment or a profiler are left out.
--   log_sd: pooled SD of ln(steady_tps); spread: exp(log_sd) - 1 (one SD, as a share)
--   df: degrees of freedom (launches - groups); pairs: A/A pairs the groups hold
--   max_pair_diff: the largest ratio - 1 between two launches of one group
CREATE OR REPLACE VIEW launch_noise AS
-- every float sum here is taken in a fixed order (a parallel sum's last digits follow the
-- threads', and a view must read the same from one query to the next)
WITH v AS (
    SELECT c.env_fingerprint, c.model, c.config_key, coalesce(c.workload, '') AS workload,
           l.stratum, ln(l.steady_tps) AS y
    FROM launch_values l JOIN run_configs c USING (run_id)
    WHERE c.env_complete AND NOT coalesce(c.profiled, false)
),
g AS (
    SELECT env_fingerprint, model, config_key, workload, stratum, count(*) AS n,
           list(y ORDER BY y) AS ys, max(y) - min(y) AS log_range
    FROM v GROUP BY ALL HAVING count(*) >= 2
),
m AS (SELECT *, list_sum(ys) / n AS m FROM g),
d AS (SELECT *, list_sum(list_transform(ys, lambda y: (y - m) ^ 2)) AS ss FROM m)
SELECT env_fingerprint, model, stratum, sum(n)::BIGINT AS launches,
       sum(n * (n - 1) // 2)::BIGINT AS pairs, count(*) AS configurations,
       sum(n - 1)::BIGINT AS df, sqrt(sum(ss ORDER BY ss) / sum(n - 1)) AS log_sd,
       exp(sqrt(sum(ss ORDER BY ss) / sum(n - 1))) - 1 AS spread,
       exp(max(log_range)) - 1 AS max_pair_diff
FROM d GROUP BY ALL;

-- Every (speculative run, baseline run) of the same model, with what keeps them apart.
-- differing_keys: identity keys whose values differ (or are set in only one run).
-- run_pairs_of(complete): the same, of the baselines whose environment is complete only
-- (`complete` true: what spec_pairing reads; a file of 1,586 launches from logs alone has
-- none, and its 628,848 pairs took ~1 s to diff).
CREATE OR REPLACE MACRO run_pairs_of(complete) AS TABLE
WITH spec AS (
    SELECT r.*, s.strata, w.workload FROM runs r JOIN run_summary s USING (run_id)
    JOIN run_configs w USING (run_id)
    WHERE r.role = 'speculative'
),
base AS (
    -- an ab campaign's warm-up launch (cold caches, unjudged) is nobody's baseline
    SELECT r.*, s.strata, w.workload FROM runs r JOIN run_summary s USING (run_id)
    JOIN run_configs w USING (run_id)
    WHERE r.role = 'baseline' AND (r.env_complete OR NOT complete) AND r.run_id NOT IN (
        SELECT run_id FROM run_env WHERE key = 'launch.role' AND value = 'warmup')
),
pairs AS (
    -- a speculation result is judged against a baseline of its own engine
    SELECT s.run_id AS spec_run_id, b.run_id AS baseline_run_id
    FROM spec s JOIN base b ON s.model IS NOT DISTINCT FROM b.model
                           AND s.engine IS NOT DISTINCT FROM b.engine
),
ident AS (
    SELECT run_id, key, value FROM run_env WHERE tier = 'identity' AND run_id IN (
        SELECT spec_run_id FROM pairs UNION SELECT baseline_run_id FROM pairs)
),
-- Runs with the same identity keys and values share a representative: keys are diffed
-- once per pair of identities, not once per pair of runs.
same_identity AS (
    SELECT run_id, min(run_id) OVER (PARTITION BY identity) AS rep
    FROM (SELECT run_id, list((key, value) ORDER BY key, value) AS identity
          FROM ident GROUP BY run_id)
),
cand AS (
    SELECT p.*, coalesce(si.rep, '') AS spec_rep, coalesce(bi.rep, '') AS base_rep
    FROM pairs p
    LEFT JOIN same_identity si ON si.run_id = p.spec_run_id
    LEFT JOIN same_identity bi ON bi.run_id = p.baseline_run_id
),
rep_pairs AS (SELECT DISTINCT spec_rep, base_rep FROM cand),
reps AS (SELECT spec_rep AS rep FROM rep_pairs UNION SELECT base_rep FROM rep_pairs),
-- A (key, value) that every identity compared holds differs in no pair: only the others
-- are compared (most of the ~460 keys of a pair of identities are alike in every launch)
rep_ident AS (SELECT i.* FROM ident i SEMI JOIN reps ON reps.rep = i.run_id),
varying AS (
    SELECT i.* FROM rep_ident i
    ANTI JOIN (SELECT key, value FROM rep_ident GROUP BY ALL
               HAVING count(*) = (SELECT count(*) FROM reps)) c
      ON c.key = i.key AND c.value IS NOT DISTINCT FROM i.value
),
-- A key differs where one side's (key, value) has no equal on the other: anti-joins keep
-- only those (a pair of identities holds ~460 keys alike; every key of every pair joined
-- and grouped took 1.8 s and 2.4 GB for 8,190 pairs of a file of 1,586 launches, 0.6 s so)
one_sided AS (
    SELECT p.spec_rep, p.base_rep, i.key FROM rep_pairs p JOIN varying i ON i.run_id = p.spec_rep
    ANTI JOIN varying o ON o.run_id = p.base_rep AND o.key = i.key
                       AND o.value IS NOT DISTINCT FROM i.value
    UNION ALL
    SELECT p.spec_rep, p.base_rep, i.key FROM rep_pairs p JOIN varying i ON i.run_id = p.base_rep
    ANTI JOIN varying o ON o.run_id = p.spec_rep AND o.key = i.key
                       AND o.value IS NOT DISTINCT FROM i.value
),
diffs AS (
    SELECT spec_rep, base_rep, list(DISTINCT key ORDER BY key) AS differing_keys
    FROM one_sided GROUP BY ALL
)
SELECT s.run_id AS spec_run_id, s.name AS spec_name, b.run_id AS baseline_run_id,
       b.name AS baseline_name, s.env_complete AS spec_env_complete,
       b.env_complete AS baseline_env_complete,
       s.env_fingerprint = b.env_fingerprint AS same_fingerprint,
       coalesce(d.differing_keys, []) AS differing_keys,
       len(coalesce(d.differing_keys, [])) AS n_differing,
       -- one workload: a concurrency stratum both logs reached, or one benchmark both
       -- ran (the same records' shape and bench command: a log of few windows has no
       -- steady stratum, and speculation moves the running-request levels)
       list_has_any(coalesce(s.strata, []), coalesce(b.strata, []))
         OR coalesce(s.workload = b.workload, false) AS workload_overlap,
       b.profiled AS baseline_profiled
FROM cand c
JOIN spec s ON s.run_id = c.spec_run_id
JOIN base b ON b.run_id = c.baseline_run_id
LEFT JOIN diffs d ON d.spec_rep = c.spec_rep AND d.base_rep = c.base_rep;

CREATE OR REPLACE VIEW run_pairs AS SELECT * FROM run_pairs_of(false);

-- One row per speculative run: is it paired with a same-environment baseline?
--   status: paired | unpaired | unknown environment
--   baselines: the matching baselines (paired), else the nearest ones
--   nearest_differences: e.g. "baseline-tuned differs only in NCCL_ALGO, NCCL_PROTO"
CREATE OR REPLACE VIEW spec_pairing AS
WITH ok AS (
    SELECT spec_run_id, list(baseline_name ORDER BY baseline_name) AS baselines
    FROM run_pairs_of(true)
    WHERE spec_env_complete AND baseline_env_complete AND same_fingerprint
      AND workload_overlap AND NOT coalesce(baseline_profiled, false)
    GROUP BY spec_run_id
),
near AS (
    SELECT spec_run_id, list(baseline_name ORDER BY baseline_name) AS baselines,
           string_agg('baseline ' || baseline_name || CASE WHEN n_differing = 0
                THEN ' matches the environment but not the workload (no concurrency stratum or benchmark shared)'
                ELSE ' differs only in ' || array_to_string(differing_keys, ', ') END, '; '
                ORDER BY baseline_name) AS differences
    FROM (SELECT * FROM run_pairs_of(true)
          WHERE baseline_env_complete AND NOT coalesce(baseline_profiled, false)
          QUALIFY rank() OVER (PARTITION BY spec_run_id ORDER BY n_differing) = 1)
    GROUP BY spec_run_id
)
SELECT r.run_id, r.name, r.spec_algorithm, r.env_complete,
       CASE
         WHEN NOT r.env_complete THEN 'unknown environment'
         WHEN ok.spec_run_id IS NOT NULL THEN 'paired'
         ELSE 'unpaired'
       END AS status,
       CASE WHEN ok.spec_run_id IS NOT NULL THEN ok.baselines ELSE near.baselines END
         AS baselines,
       CASE WHEN r.env_complete AND ok.spec_run_id IS NULL THEN near.differences END
         AS nearest_differences
FROM runs r
LEFT JOIN ok ON ok.spec_run_id = r.run_id
LEFT JOIN near ON near.spec_run_id = r.run_id
WHERE r.role = 'speculative';

-- A linked benchmark next to the server log of the run it measured: the log's steady
-- decode throughput, the benchmark's output throughput and the throughput implied by its
-- median TPOT (concurrency × 1000 / TPOT ms), with the gaps.
CREATE OR REPLACE VIEW bench_vs_log AS
SELECT r.name AS run, b.source_path, b.line_no, b.tool, b.link_method, b.max_concurrency,
       s.steady_gen_throughput AS log_steady_tps, s.steady_stratum AS log_stratum,
       b.output_throughput AS bench_output_tps,
       CASE WHEN b.median_tpot_ms > 0
            THEN coalesce(b.max_concurrency, 1) * 1000.0 / b.median_tpot_ms END
         AS tpot_implied_tps,
       b.output_throughput / s.steady_gen_throughput - 1 AS bench_gap,
       CASE WHEN b.median_tpot_ms > 0
            THEN coalesce(b.max_concurrency, 1) * 1000.0 / b.median_tpot_ms
                 / s.steady_gen_throughput - 1 END AS tpot_gap
FROM bench_results b
JOIN runs r USING (run_id)
LEFT JOIN run_summary s USING (run_id)
WHERE b.duplicate_of IS NULL;

-- Per run and phase of a phase-timing dump: share of the cycle, ms per cycle, and the
-- tok/s the cycle time implies (accepted tokens / cycle time).
CREATE OR REPLACE VIEW phase_summary AS
SELECT r.name AS run, p.run_id, p.source_path, p.phase,
       bool_or(p.synchronized) AS synchronized, count(*) AS cycles,
       sum(p.ms) / sum(p.cycle_ms) AS share, avg(p.ms) AS ms_per_cycle,
       avg(p.cycle_ms) AS cycle_ms,
       1000.0 * sum(p.accepted_tokens) / sum(p.cycle_ms) AS implied_tps
FROM phase_timings p LEFT JOIN runs r USING (run_id)
GROUP BY ALL;

-- An engine's counters over each bench of a launch (each load level): the snapshot after
-- minus the one before, summed over label sets (finish reasons, streaming or not, engine
-- cores), by engine-neutral metric.  `part`: total (a counter), or a histogram's bucket,
-- sum or count.  A lone snapshot (a user's curl: no phase) is in metric_snapshots only.
CREATE OR REPLACE VIEW counter_deltas AS
WITH parts AS (
    SELECT run_id, taken_at, phase, level, level_by, engine, metric,
           CASE WHEN sample LIKE '%\_bucket' ESCAPE '\' THEN 'bucket'
                WHEN sample LIKE '%\_sum' ESCAPE '\' THEN 'sum'
                WHEN sample LIKE '%\_count' ESCAPE '\' THEN 'count'
                WHEN sample LIKE '%\_created' ESCAPE '\' THEN 'created'
                ELSE 'total' END AS part,
           le, value
    FROM metric_snapshots
    WHERE metric IS NOT NULL AND run_id IS NOT NULL AND phase IN ('before', 'after')
), snaps AS (
    SELECT run_id, phase, level, level_by, engine, metric, part, le,
           max(taken_at) AS taken_at, sum(value) AS value
    FROM parts WHERE part <> 'created'
    GROUP BY ALL
)
SELECT r.name AS run, a.run_id, a.level, a.level_by, a.engine, a.metric, a.part, a.le,
       b.value AS before, a.value AS after, a.value - b.value AS delta,
       epoch(a.taken_at) - epoch(b.taken_at) AS window_s,
       b.taken_at AS before_at, a.taken_at AS after_at
FROM snaps a
JOIN snaps b ON a.run_id = b.run_id AND a.level IS NOT DISTINCT FROM b.level
 AND a.level_by IS NOT DISTINCT FROM b.level_by AND a.metric = b.metric
 AND a.part = b.part AND a.le IS NOT DISTINCT FROM b.le
 AND a.phase = 'after' AND b.phase = 'before'
LEFT JOIN runs r ON r.run_id = a.run_id;

-- When each bench (load level) of a launch ran: from the snapshot before it to the one
-- after it (counter_deltas' times), as instants (UTC) and on the run's own log clock
-- (`runs.utc_offset_s`; NULL where that is unknown).
CREATE OR REPLACE VIEW level_windows AS
WITH w AS (
    SELECT run_id, level, level_by,
           max(taken_at) FILTER (WHERE phase = 'before') AS began_utc,
           max(taken_at) FILTER (WHERE phase = 'after') AS ended_utc
    FROM metric_snapshots
    WHERE run_id IS NOT NULL AND phase IS NOT NULL AND taken_at IS NOT NULL
    GROUP BY ALL
)
SELECT r.name AS run, w.run_id, w.level, w.level_by, w.began_utc, w.ended_utc,
       w.began_utc + to_seconds(r.utc_offset_s) AS began_at,
       w.ended_utc + to_seconds(r.utc_offset_s) AS ended_at
FROM w JOIN runs r USING (run_id)
WHERE w.began_utc IS NOT NULL AND w.ended_utc IS NOT NULL;

-- The server log's samples (batch_states: kind, state, reason) inside each level's window:
-- the log's lines split by load level.
CREATE OR REPLACE VIEW level_samples AS
SELECT w.level, w.level_by, b.*
FROM batch_states b
JOIN level_windows w ON w.run_id = b.run_id AND b.ts >= w.began_at AND b.ts <= w.ended_at;

-- A profiled run next to unprofiled runs of the same environment and settings: how much
-- the instrumentation slowed the server (the mission's 71 vs 31 tok/s: 2.3×).
CREATE OR REPLACE VIEW profiling_overhead AS
SELECT p.name AS profiled_run, u.name AS unprofiled_run,
       p.steady_gen_throughput AS profiled_tps, u.steady_gen_throughput AS unprofiled_tps,
       u.steady_gen_throughput / p.steady_gen_throughput AS overhead_factor
FROM run_summary p
JOIN runs rp ON rp.run_id = p.run_id
JOIN run_summary u ON u.env_fingerprint = p.env_fingerprint AND u.run_id <> p.run_id
JOIN runs ru ON ru.run_id = u.run_id
WHERE p.profiled AND NOT coalesce(u.profiled, false) AND p.env_complete AND u.env_complete
  AND rp.spec_algorithm IS NOT DISTINCT FROM ru.spec_algorithm
  AND rp.spec_num_steps IS NOT DISTINCT FROM ru.spec_num_steps
  AND rp.spec_eagle_topk IS NOT DISTINCT FROM ru.spec_eagle_topk
  AND rp.spec_num_draft_tokens IS NOT DISTINCT FROM ru.spec_num_draft_tokens
  AND p.steady_gen_throughput > 0;

-- Device time per kernel of each profiler trace, biggest first within a trace: count,
-- total and mean time, and the kernel's share of the trace's device time.  "Top kernels
-- of run X": WHERE run = 'X' ORDER BY total_ms DESC.
CREATE OR REPLACE VIEW kernel_summary AS
-- durations are summed as decimals (to the picosecond): exact, so the same in every query
-- (a parallel float sum's last digits follow the threads')
WITH per AS (
    SELECT source_path, kernel_class, name AS kernel, count(*) AS launches,
           sum(dur_us::DECIMAL(38, 6)) AS total_us, count(dur_us) AS timed
    FROM trace_kernels GROUP BY source_path, kernel_class, name
)
SELECT r.name AS run, t.run_id, p.source_path, t.tp_rank, t.dp_rank, t.pp_rank, t.ep_rank,
       t.stage, p.kernel_class, p.kernel, p.launches, p.total_us::DOUBLE / 1000.0 AS total_ms,
       p.total_us::DOUBLE / p.timed AS mean_us,
       p.total_us::DOUBLE / (sum(p.total_us) OVER (PARTITION BY p.source_path))::DOUBLE
         AS share
FROM per p JOIN traces t USING (source_path) LEFT JOIN runs r ON r.run_id = t.run_id;

-- Device time per kernel class (gemm, attention, communication, memory, other) per trace.
CREATE OR REPLACE VIEW kernel_class_summary AS
SELECT run, run_id, source_path, tp_rank, kernel_class, sum(launches) AS launches,
       sum(total_ms ORDER BY total_ms) AS total_ms, sum(share ORDER BY share) AS share
FROM kernel_summary GROUP BY ALL;

-- One row per scheduler step the engine marked in a profiler trace (SGLang 0.5.16+:
-- `step[DECODE bs=48]`, `step[EXTEND bs=24 toks=4409]`, `step[VERIFY bs=48]`, ...; the
-- forms by release are in schemas/README.md): its kind, batch size, extend tokens, CPU-side wall
-- time, device-side span, and the device time of the kernels that ran inside the span,
-- split by kernel class.  The k-th CPU-side span of a name is paired with the k-th
-- device-side one; a kernel belongs to the step whose device span holds its start.
CREATE OR REPLACE VIEW trace_steps AS
WITH marks AS (
    SELECT source_path, side, name, ts, ts_us, dur_us,
           row_number() OVER (PARTITION BY source_path, side, name ORDER BY ts_us) AS k
    FROM trace_annotations WHERE starts_with(name, 'step[')
),
steps AS (
    SELECT coalesce(c.source_path, g.source_path) AS source_path,
           coalesce(c.name, g.name) AS name, coalesce(c.ts, g.ts) AS started_at,
           c.dur_us / 1000.0 AS cpu_ms, g.ts_us AS gpu_start_us, g.dur_us AS gpu_dur_us,
           coalesce(c.ts_us, g.ts_us) AS order_us
    FROM (SELECT * FROM marks WHERE side = 'cpu') c
    FULL JOIN (SELECT * FROM marks WHERE side = 'gpu') g USING (source_path, name, k)
),
numbered AS (
    SELECT *, row_number() OVER (PARTITION BY source_path ORDER BY order_us) AS step_no
    FROM steps
),
kern AS (
    SELECT n.source_path, n.step_no, k.kernel_class, count(*) AS kernels,
           round(sum(k.dur_us) / 1000.0, 6) AS kernel_ms  -- (rounded: a sum in any order)
    FROM numbered n JOIN trace_kernels k
      ON k.source_path = n.source_path AND k.ts_us >= n.gpu_start_us
     AND k.ts_us < n.gpu_start_us + n.gpu_dur_us
    GROUP BY ALL
),
per_step AS (
    SELECT source_path, step_no, sum(kernels)::BIGINT AS kernels,
           round(sum(kernel_ms), 6) AS kernel_ms,
           map_from_entries(list((kernel_class, kernel_ms) ORDER BY kernel_class))
             AS kernel_ms_by_class
    FROM kern GROUP BY ALL
)
SELECT r.name AS run, t.run_id, n.source_path, t.tp_rank, n.step_no, n.name,
       replace(regexp_extract(n.name, '^step\[(\w+)', 1), 'TARGET_VERIFY', 'VERIFY')
         AS step_kind,
       TRY_CAST(regexp_extract(n.name, '[\[ ]bs=(\d+)', 1) AS INTEGER) AS batch_size,
       TRY_CAST(regexp_extract(n.name, ' toks=(\d+)', 1) AS INTEGER) AS extend_tokens,
       n.started_at, n.cpu_ms, n.gpu_dur_us / 1000.0 AS gpu_span_ms,
       coalesce(p.kernels, 0) AS kernels, coalesce(p.kernel_ms, 0) AS kernel_ms,
       p.kernel_ms_by_class
FROM numbered n JOIN traces t USING (source_path)
LEFT JOIN per_step p USING (source_path, step_no)
LEFT JOIN runs r ON r.run_id = t.run_id;

-- Per user annotation (record_function range such as draft / verify) of each trace: how
-- often it ran, its CPU-side wall time, and the device time of the kernels launched
-- inside it, with that time's share of all annotated kernel time.
CREATE OR REPLACE VIEW annotation_summary AS
WITH spans AS (
    SELECT source_path, name AS annotation,
           count(*) FILTER (WHERE side = 'cpu') AS calls,
           -- (decimal sums: exact, the same in every query, as kernel_summary's)
           sum(dur_us::DECIMAL(38, 6)) FILTER (WHERE side = 'cpu')::DOUBLE / 1000.0 AS cpu_ms,
           sum(dur_us::DECIMAL(38, 6)) FILTER (WHERE side = 'gpu')::DOUBLE / 1000.0
             AS gpu_span_ms
    FROM trace_annotations WHERE NOT starts_with(name, 'ProfilerStep#')
    GROUP BY ALL
),
kern AS (
    SELECT source_path, annotation, count(*) AS kernels,
           sum(dur_us::DECIMAL(38, 6)) AS kernel_us
    FROM trace_kernels WHERE annotation IS NOT NULL GROUP BY ALL
)
SELECT r.name AS run, t.run_id, s.source_path, t.tp_rank, s.annotation, s.calls, s.cpu_ms,
       s.gpu_span_ms, coalesce(k.kernels, 0) AS kernels,
       coalesce(k.kernel_us::DOUBLE / 1000.0, 0) AS kernel_ms,
       k.kernel_us::DOUBLE / (sum(k.kernel_us) OVER (PARTITION BY s.source_path))::DOUBLE
         AS kernel_share
FROM spans s JOIN traces t USING (source_path)
LEFT JOIN kern k USING (source_path, annotation)
LEFT JOIN runs r ON r.run_id = t.run_id;
