-- 0011: verdicts of (speculative run, baseline) pairs, kept by `logpipe check` so that a
-- database of hundreds of pairs is not judged again from its batch lines on every check.
-- pair_key hashes everything a verdict is computed from (both runs' data and records,
-- the options, the rules); a changed input gives a new key.  Internal: see
-- logpipe/verdicts.py.
CREATE TABLE pair_verdict_cache (
    pair_key         VARCHAR NOT NULL,
    spec_run_id      VARCHAR NOT NULL,
    baseline_run_id  VARCHAR NOT NULL,
    verdict          VARCHAR NOT NULL,
    speedup          DOUBLE,
    detail           VARCHAR
);
