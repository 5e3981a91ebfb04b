-- 0016: one clock.  SGLang stamps its lines in the server host's local time with no zone;
-- traces, docker stamps and zoned outer stamps are UTC.  utc_offset_s is the offset of a
-- run's stamps from UTC (ts - utc_offset_s seconds is the instant), and clock_source says
-- where it came from: the manifest (capture records the host's zone), `ingest --tz`, the
-- outer stamps of a host logger that names its zone, or NULL when nothing says (readers
-- then assume the zone of the host that ingests).  Linking compares instants.
ALTER TABLE runs ADD COLUMN utc_offset_s INTEGER;
ALTER TABLE runs ADD COLUMN clock_source VARCHAR;
