"""Metrics and judgements over the stored tables: pure functions of rows, no I/O of their
own beyond the queries that load those rows."""
