-- SGLang's samples as ingest's judged counts read them (logpipe/classify.py): the rows of
-- its fragment of run_samples_in (samples.sql: its batch lines as they are), read from the
-- stored table, with the label ids of kind and rank_tag instead of their texts (the view's
-- joins with logpipe_internal.labels, and a text a row, cost three times the scan).
SELECT run_id, line_no, epoch_us(ts) AS us, kind_code, rank_tag_code, running_req,
       gen_throughput, input_throughput, accept_len, accept_rate, token_usage, cuda_graph
FROM logpipe_internal.batches WHERE in_runs(run_id, ?, ?)
