-- 0029: the verdicts of `ab` campaigns (each candidate arm against the baseline arm, as
-- `check` reports them), kept like the pairs' (0011): a campaign is judged again only when
-- an input of its verdict changes.  campaign_key hashes them all: every launch of the
-- campaign and every launch of its environments (whose repeats are its launch noise),
-- each by its data, record and linked rows, their order, the options and the rules.
-- Internal: see logpipe/analysis/verdicts.py.
CREATE TABLE logpipe_internal.campaign_verdict_cache (
    campaign_key  VARCHAR NOT NULL,
    plan          VARCHAR NOT NULL,
    position      INTEGER NOT NULL,
    spec_run      VARCHAR,
    baseline_run  VARCHAR,
    verdict       VARCHAR,
    speedup       DOUBLE,
    detail        VARCHAR
);
