-- The toy engine's fragment of run_samples(rid): its stats lines as samples.
SELECT run_id, source_path, line_no, ts, kind, NULL AS rank_tag, running AS running_req,
       running AS running_now, waiting AS queue_req, gen_tps AS gen_throughput,
       NULL::DOUBLE AS input_throughput, NULL::DOUBLE AS accept_len,
       NULL::DOUBLE AS accept_rate, NULL::DOUBLE AS token_usage, NULL::BOOLEAN AS cuda_graph
FROM toy_stats WHERE rid IS NULL OR run_id = rid
