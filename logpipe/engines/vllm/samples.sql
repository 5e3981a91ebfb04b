-- vLLM's fragment of run_samples_in(rid, ids) (schemas/views.sql): its stats lines as kind
-- 'window' (an average over its logging interval, not a batch; rank_tag names the engine
-- of a DP rank), with the mean acceptance length and rate of the spec line of the same
-- interval.  A window's printed Running is a snapshot at the moment of logging: under
-- requests shorter than the interval it swings between 0 and the concurrency while the
-- engine generates throughout.  So a window is idle when it generated nothing (no prompt
-- and no generation throughput), and its load level is the peak Running of its busy
-- stretch (the windows between two idle ones: one benchmark's load).
SELECT w.run_id, w.source_path, w.line_no, w.ts, 'window' AS kind, w.rank_tag,
       CASE WHEN w.busy THEN max(w.running) FILTER (WHERE w.busy)
                               OVER (PARTITION BY w.run_id, w.source_path, w.rank_tag,
                                                  w.stretch)
            ELSE 0 END AS running_req,
       w.running AS running_now, w.waiting AS queue_req, w.gen_tps AS gen_throughput,
       w.prompt_tps AS input_throughput, w.accept_len, w.accept_rate,
       w.kv_usage AS token_usage, NULL::BOOLEAN AS cuda_graph
FROM (
    SELECT s.*, CASE WHEN s.engine_index IS NOT NULL THEN 'engine ' || s.engine_index END
             AS rank_tag,
           coalesce(s.gen_tps, 0) > 0 OR coalesce(s.prompt_tps, 0) > 0 AS busy,
           count(*) FILTER (WHERE coalesce(s.gen_tps, 0) = 0 AND coalesce(s.prompt_tps, 0) = 0)
             OVER (PARTITION BY s.run_id, s.source_path, s.engine_index ORDER BY s.line_no, s.ts)
             AS stretch,
           CASE WHEN NOT m.cumulative THEN m.mean_acceptance_length
                WHEN m.d_drafted > 0 AND m.d_emitted >= 0
                  THEN m.spec_tokens * m.d_emitted / m.d_drafted END AS accept_len,
           CASE WHEN NOT m.cumulative THEN m.acceptance_rate
                WHEN m.d_drafted > 0 AND m.d_accepted >= 0
                  THEN m.d_accepted / m.d_drafted END AS accept_rate
    FROM vllm_stats s
    LEFT JOIN (
        -- V0 prints counts since the server started: the interval's share is the
        -- difference from the line before (mean length = tokens emitted per draft of k)
        SELECT *,
               accepted_tokens - lag(accepted_tokens) OVER p AS d_accepted,
               drafted_tokens::DOUBLE - lag(drafted_tokens) OVER p AS d_drafted,
               emitted_tokens - lag(emitted_tokens) OVER p AS d_emitted
        FROM vllm_spec_metrics
        WHERE in_runs(run_id, rid, ids)
        WINDOW p AS (PARTITION BY run_id, source_path, engine_index ORDER BY line_no, ts)
    ) m ON m.run_id = s.run_id AND m.source_path = s.source_path
       AND m.stats_line_no = s.line_no
    WHERE in_runs(s.run_id, rid, ids)
) w
