"""Spike: parse decode lines inside DuckDB (whole lines read as one VARCHAR column,
fields cut with regexp_extract, TRY_CAST, one INSERT ... SELECT) into a table of a fresh
database.  Decode lines only, as the Python re loop: the comparison is with the scan of
logpipe's C lane, which reads every line kind.

    python duckdb_parse.py LOG NEW_DB
"""

import sys

import duckdb

log, target = sys.argv[1], sys.argv[2]
con = duckdb.connect(target)
con.execute("""
CREATE TABLE decode (running_req BIGINT, num_token BIGINT, token_usage DOUBLE,
                     gen_throughput DOUBLE, queue_req BIGINT)""")
# the Python re loop's pattern (re_loop.py), field for field
pattern = (r"Decode batch.*?#running-req: (\d+), "
           r"#token: (\d+), token usage: ([\d.]+), .*?gen throughput \(token/s\): ([\d.]+), "
           r"#queue-req: (\d+)")
con.execute(f"""
INSERT INTO decode
SELECT TRY_CAST(s.a AS BIGINT), TRY_CAST(s.b AS BIGINT), TRY_CAST(s.c AS DOUBLE),
       TRY_CAST(s.d AS DOUBLE), TRY_CAST(s.e AS BIGINT)
FROM (
    SELECT regexp_extract(line, '{pattern}', ['a', 'b', 'c', 'd', 'e']) AS s
    FROM read_csv(?, columns = {{'line': 'VARCHAR'}}, delim = '\\x01', quote = '',
                  escape = '', header = false, strict_mode = false, null_padding = true)
    WHERE contains(line, 'Decode batch')
)
WHERE s.a <> ''
""", [log])
print(con.execute("SELECT count(*) FROM decode").fetchone()[0])
