/* The fast lane of the SGLang log parser: one pass in C over a block of complete lines.
 *
 * It takes only the line shapes that make up nearly all of a long log, when they are
 * written plainly: a batch line ("[date time(.ms) RANKS] Prefill/Decode batch..., key:
 * value, ...") and a uvicorn access line ("[date time] INFO:     client - "GET /path
 * HTTP/1.1" 200 OK"); and a request log's lines, "Receive: obj=..." (which no table reads)
 * and "Finish: obj=..., out={...}" (whose text the Python side reads into a request row),
 * as "quiet" rows: their stamps join their runs' spans.  Everything else -- and any line
 * of those shapes with something unusual in it (a wrapper prefix, a time-only stamp, a
 * control character, a value that is not a plain number, a composite value, a phrase an
 * event pattern looks for) -- goes to the "slow" text returned alongside, which the
 * vectorised polars parser reads exactly as before.  The rows produced here are, by
 * construction and by test, the rows that parser would produce for the same lines
 * (logpipe/engines/sglang/fastlane.py holds the contract).
 *
 * A fast line immediately followed by a slow line is also copied to the slow text and
 * flagged keep=0 here, so the slow parser sees the line each of its lines follows (a
 * traceback's end, the leader of a continuation) -- unless the slow line starts with
 * docker's stamp or SGLang's, which makes it a leader of its own.  A block's last line,
 * when fast, is not: the Python side carries the state past it (parser.py), and a block
 * of fast lines only leaves the slow parser nothing to do.
 *
 * scan(data, phrases, keys, graph_suffix, any_line, record_like) returns a dict of raw
 * column buffers; the Python side wraps them as Arrow arrays without copying.
 */
#include "../columns.h"

/* ---------------------------------------------------------------- small parsers */

/* n digits at s → value; -1 if any is not a digit */
static int64_t digits(const char *s, int n) {
    int64_t v = 0;
    for (int i = 0; i < n; i++) {
        if (!is_digit(s[i])) return -1;
        v = v * 10 + (s[i] - '0');
    }
    return v;
}

static int64_t days_from_civil(int64_t y, int64_t m, int64_t d) {
    y -= m <= 2;
    int64_t era = (y >= 0 ? y : y - 399) / 400;
    int64_t yoe = y - era * 400;
    int64_t doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
    int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    return era * 146097 + doe - 719468;
}

static int days_in_month(int64_t y, int64_t m) {
    static const int dm[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    if (m == 2 && ((y % 4 == 0 && y % 100 != 0) || y % 400 == 0)) return 29;
    return dm[m - 1];
}

/* A plain integer: -?\d{1,18} */
static int parse_int(const char *s, size_t n, int64_t *out) {
    size_t i = 0;
    int neg = 0;
    if (n && s[0] == '-') { neg = 1; i = 1; }
    if (n - i < 1 || n - i > 18) return 0;
    int64_t v = 0;
    for (; i < n; i++) {
        if (!is_digit(s[i])) return 0;
        v = v * 10 + (s[i] - '0');
    }
    *out = neg ? -v : v;
    return 1;
}

/* JSON-style number: -?(0|[1-9]\d*)(\.\d+)?([eE][-+]?\d+)? */
static int is_number(const char *s, size_t n) {
    size_t i = 0;
    if (i < n && s[i] == '-') i++;
    if (i >= n) return 0;
    if (s[i] == '0') i++;
    else if (s[i] >= '1' && s[i] <= '9') { while (i < n && is_digit(s[i])) i++; }
    else return 0;
    if (i < n && s[i] == '.') {
        i++;
        size_t k = i;
        while (i < n && is_digit(s[i])) i++;
        if (i == k) return 0;
    }
    if (i < n && (s[i] == 'e' || s[i] == 'E')) {
        i++;
        if (i < n && (s[i] == '+' || s[i] == '-')) i++;
        size_t k = i;
        while (i < n && is_digit(s[i])) i++;
        if (i == k) return 0;
    }
    return i == n;
}

static const double POW10[] = {1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10,
                               1e11, 1e12, 1e13, 1e14, 1e15};

/* What a float column accepts: -?\d+(\.\d+)?([eE][-+]?\d+)? (leading zeros too, as the
 * polars cast does; extra's JSON numbers use the stricter is_number) */
static int is_decimal(const char *s, size_t n) {
    size_t i = 0;
    if (i < n && s[i] == '-') i++;
    size_t k = i;
    while (i < n && is_digit(s[i])) i++;
    if (i == k) return 0;
    /* the rest, from the last digit of the integer part, is a plain JSON number */
    return i == n || is_number(s + i - 1, n - i + 1);
}

static int parse_float(const char *s, size_t n, double *out) {
    char tmp[64];
    if (!is_decimal(s, n) || n >= sizeof tmp) return 0;
    /* d+(.d+)? with at most 15 digits: the integer and the power of ten are exact doubles,
     * so one division gives the correctly rounded value, as strtod would */
    size_t i = s[0] == '-', nd = 0, frac = 0;
    int dot = 0;
    uint64_t m = 0;
    for (; i < n; i++) {
        if (s[i] == '.') { dot = 1; continue; }
        if (!is_digit(s[i]) || nd >= 15) break;
        m = m * 10 + (uint64_t)(s[i] - '0');
        nd++;
        frac += dot;
    }
    if (i == n) {
        double v = (double)m / POW10[frac];
        *out = s[0] == '-' ? -v : v;
        return 1;
    }
    memcpy(tmp, s, n);
    tmp[n] = 0;
    *out = strtod(tmp, NULL);
    /* a number past a double's range (1e400): left to the line parser, which rejects it */
    return !Py_IS_INFINITY(*out);
}

/* The first ':' or ',' in s..e, sixteen bytes at a time where SSE2 is there */
static inline const char *find_sep(const char *s, const char *e) {
#ifdef __SSE2__
    const __m128i colon = _mm_set1_epi8(':'), comma = _mm_set1_epi8(',');
    for (; e - s >= 16; s += 16) {
        __m128i v = _mm_loadu_si128((const __m128i *)(const void *)s);
        int m = _mm_movemask_epi8(_mm_or_si128(_mm_cmpeq_epi8(v, colon),
                                               _mm_cmpeq_epi8(v, comma)));
        if (m) return s + __builtin_ctz((unsigned)m);
    }
#endif
    for (; s < e; s++)
        if (*s == ':' || *s == ',') return s;
    return NULL;
}

/* The first ", " or ": " in s..e (what: ',' or ':' for only that one, 0 for either) */
static inline const char *find_pair(const char *s, const char *e, char what) {
    while (s + 1 < e && (s = find_sep(s, e - 1)) != NULL) {
        if (s[1] == ' ' && (!what || *s == what)) return s;
        s++;
    }
    return NULL;
}

static void strip(const char **s, const char **e) {
    while (*s < *e && **s == ' ') (*s)++;
    while (*e > *s && (*e)[-1] == ' ') (*e)--;
}

static inline uint64_t mix(uint64_t h, uint64_t w) {
    h ^= w;
    h *= 0x9E3779B97F4A7C15ULL;
    return h ^ (h >> 29);
}

/* Eight ASCII bytes with every digit replaced by '0' (no byte may be >= 0x80) */
static inline uint64_t fold_digits(uint64_t w) {
    const uint64_t hi = 0x8080808080808080ULL;
    uint64_t ge0 = w + 0x5050505050505050ULL; /* high bit: byte >= '0' */
    uint64_t gt9 = w + 0x4646464646464646ULL; /* high bit: byte > '9' */
    uint64_t digit = ((ge0 & ~gt9 & hi) >> 7) * 0xFF;
    return (w & ~digit) | (0x3030303030303030ULL & digit);
}

static inline uint64_t load8(const char *s) {
    uint64_t w;
    memcpy(&w, s, 8);
    return w;
}

/* Hash of ASCII text s..e with every digit read as '0', thirty-two bytes at a time in four
 * independent lanes (one chain of multiplies per line was a sixth of the scan, two a
 * quarter).  The last bytes are read as the 8 bytes that end at e, shifted, where that
 * stays at or after lo (the line's start): no call to memcpy per line.  Lines that differ
 * only in their digits hash alike (no era feature reads a digit's value). */
static uint64_t shape_hash(uint64_t h, const char *s, const char *e, const char *lo) {
    size_t n = (size_t)(e - s);
    uint64_t h1 = h ^ 0xC2B2AE3D27D4EB4FULL, h2 = h ^ 0x165667B19E3779F9ULL,
             h3 = h ^ 0x27D4EB2F165667C5ULL;
    for (; s + 32 <= e; s += 32) {
        h = mix(h, fold_digits(load8(s)));
        h1 = mix(h1, fold_digits(load8(s + 8)));
        h2 = mix(h2, fold_digits(load8(s + 16)));
        h3 = mix(h3, fold_digits(load8(s + 24)));
    }
    if (s + 16 <= e) {
        h = mix(h, fold_digits(load8(s)));
        h1 = mix(h1, fold_digits(load8(s + 8)));
        s += 16;
    }
    if (s + 8 <= e) {
        h2 = mix(h2, fold_digits(load8(s)));
        s += 8;
    }
    size_t r = (size_t)(e - s); /* 0-7 bytes left */
    if (r) {
        uint64_t w = 0;
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
        if (e - lo >= 8) w = load8(e - 8) >> (8 * (8 - r)); /* the last r bytes */
        else
#endif
        memcpy(&w, s, r);
        h3 = mix(h3, fold_digits(w));
    }
    return mix(mix(mix(h, h1), mix(h2, h3)), n);
}

/* ---------------------------------------------------------------- the prefix */

typedef struct {
    int64_t ts_us;                 /* dated: since the epoch; time-only: since midnight */
    int stamp;                     /* bit 0: dated; bits 1-3: digits of the fraction;
                                      NO_STAMP: the line has no prefix */
    const char *ranks, *ranks_end; /* stripped rank tag text */
    int32_t rank[4];               /* DP, TP, PP, EP */
    int rank_ok[4];
    const char *msg;
    const char *clock, *clock_end; /* a time-only stamp's text (ts_raw); NULL when dated */
    const char *line;              /* the line's first byte (shape_hash reads no earlier) */
    const char *outer, *outer_end; /* the text before SGLang's stamp that no known wrapper
                                      explains (journald, a compose service); NULL if none */
} prefix_t;

#define NO_STAMP 16

/* "[(YYYY-MM-DD )?HH:MM:SS(.f{1,6})?( [A-Za-z][A-Za-z_]*\d+)*] " at s; 0 if not exactly
 * that.  A time-only stamp (0.2.15-0.3.2) is returned as time of day: its date and the
 * midnight roll-over are applied by the caller, over every line of the file in order. */
static int parse_prefix(const char *s, const char *e, prefix_t *p) {
    if (e - s < 12 || s[0] != '[') return 0;
    p->line = s;
    int dated = s[5] == '-';
    const char *t0 = dated ? s + 12 : s + 1;
    if (dated && (e - s < 22 || s[8] != '-' || s[11] != ' ')) return 0;
    if (t0[2] != ':' || t0[5] != ':') return 0;
    int64_t day = 0;
    if (dated) {
        int64_t y = digits(s + 1, 4), mo = digits(s + 6, 2), d = digits(s + 9, 2);
        if (y < 1 || mo < 1 || mo > 12 || d < 1 || d > days_in_month(y, mo)) return 0;
        day = days_from_civil(y, mo, d);
    }
    int64_t h = digits(t0, 2), mi = digits(t0 + 3, 2), se = digits(t0 + 6, 2);
    if (h < 0 || h > 23 || mi < 0 || mi > 59 || se < 0 || se > 59) return 0;
    const char *q = t0 + 8;
    int64_t frac = 0;
    int nd = 0;
    if (q < e && *q == '.') {
        const char *f = ++q;
        while (q < e && is_digit(*q) && q - f < 7) q++;
        nd = (int)(q - f);
        if (nd < 1 || nd > 6) return 0;
        frac = digits(f, nd);
        for (int k = nd; k < 6; k++) frac *= 10;
    }
    p->stamp = dated | nd << 1;
    p->clock = dated ? NULL : t0;
    p->clock_end = q;
    p->ts_us = ((day * 86400 + h * 3600 + mi * 60 + se) * 1000000) + frac;
    for (int k = 0; k < 4; k++) p->rank_ok[k] = 0;
    const char *rs = q;
    while (q < e && *q == ' ') {
        const char *t = q + 1;
        if (t >= e || !is_alpha(*t)) return 0;
        const char *nm = t;
        while (t < e && (is_alpha(*t) || *t == '_')) t++;
        const char *nm_end = t, *dg = t;
        while (t < e && is_digit(*t)) t++;
        if (t == dg) return 0;
        if (t - dg > 9) return 0; /* the polars parser casts ranks to Int32 */
        if (nm_end - nm == 2) {
            int k = -1;
            if (nm[0] == 'D' && nm[1] == 'P') k = 0;
            else if (nm[0] == 'T' && nm[1] == 'P') k = 1;
            else if (nm[0] == 'P' && nm[1] == 'P') k = 2;
            else if (nm[0] == 'E' && nm[1] == 'P') k = 3;
            if (k >= 0 && !p->rank_ok[k]) {
                p->rank[k] = (int32_t)digits(dg, (int)(t - dg));
                p->rank_ok[k] = 1;
            }
        }
        q = t;
    }
    p->ranks = rs;
    p->ranks_end = q;
    strip(&p->ranks, &p->ranks_end);
    if (q + 1 >= e || q[0] != ']' || q[1] != ' ') return 0;
    p->msg = q + 2;
    return 1;
}

/* ---------------------------------------------------------------- wrappers
 * Two wrappers are read here, both only in front of a dated SGLang stamp (a time-only
 * stamp takes its date from the wrapper: the polars parser does that):
 * - ``docker logs --timestamps``: "YYYY-MM-DDTHH:MM:SS(.f+)?(Z|[+-]HH:?MM) +" (a known
 *   wrapper: the polars parser keeps nothing of it when SGLang's stamp follows);
 * - an outer prefix that starts with a letter (journald "Dec 04 13:00:01 node7
 *   python3[4242]: ", a compose service "sglang-1  | "): the polars parser finds SGLang's
 *   signature as the first place where ``prefix.SIGNATURE_RE`` matches and keeps the text
 *   before it (stripped) as the line's outer prefix (``line_prefixes``). */

static int digits_at(const char *q, const char *e, int n) {
    if (e - q < n) return 0;
    for (int i = 0; i < n; i++)
        if (!is_digit(q[i])) return 0;
    return 1;
}

/* the end of a docker timestamp and the spaces after it at s, or NULL */
static const char *docker_stamp(const char *s, const char *e) {
    if (!digits_at(s, e, 4) || e - s < 20 || s[4] != '-' || !digits_at(s + 5, e, 2)
        || s[7] != '-' || !digits_at(s + 8, e, 2) || s[10] != 'T' || !digits_at(s + 11, e, 2)
        || s[13] != ':' || !digits_at(s + 14, e, 2) || s[16] != ':' || !digits_at(s + 17, e, 2))
        return NULL;
    const char *q = s + 19;
    if (q < e && *q == '.') {
        const char *f = ++q;
        while (q < e && is_digit(*q)) q++;
        if (q == f) return NULL;
    }
    if (q < e && *q == 'Z') q++;
    else if (q < e && (*q == '+' || *q == '-') && digits_at(q + 1, e, 2)) {
        q += 3;
        if (q < e && *q == ':') q++;
        if (!digits_at(q, e, 2)) return NULL;
        q += 2;
    } else return NULL;
    if (q >= e || *q != ' ') return NULL;
    while (q < e && *q == ' ') q++;
    return q;
}

/* prefix.STAMP at q exactly as the regex reads it (no range checks): the byte after its
 * ']', or NULL.  "[(\d{4}-\d{2}-\d{2} )?\d{2}:\d{2}:\d{2}(\.\d{1,6})?( [A-Za-z][A-Za-z_]*\d+)*]" */
static const char *stamp_like(const char *q, const char *e) {
    const char *t = q + 1;
    if (digits_at(t, e, 4) && e - t > 10 && t[4] == '-' && digits_at(t + 5, e, 2) && t[7] == '-'
        && digits_at(t + 8, e, 2) && t[10] == ' ')
        t += 11;
    if (!digits_at(t, e, 2) || e - t < 8 || t[2] != ':' || !digits_at(t + 3, e, 2) || t[5] != ':'
        || !digits_at(t + 6, e, 2))
        return NULL;
    t += 8;
    if (t < e && *t == '.') {
        const char *f = ++t;
        while (t < e && is_digit(*t)) t++;
        if (t - f < 1 || t - f > 6) return NULL;
    }
    while (t < e && *t == ' ') {
        t++;
        if (t >= e || !is_alpha(*t)) return NULL;
        while (t < e && (is_alpha(*t) || *t == '_')) t++;
        const char *dg = t;
        while (t < e && is_digit(*t)) t++;
        if (t == dg) return NULL;
    }
    return t < e && *t == ']' ? t + 1 : NULL;
}

/* where prefix.SIGNATURE_RE finds SGLang's stamp in s..e (its '['), or NULL: the first
 * stamp followed by " ?" and a message that starts with neither whitespace nor '[' and a
 * digit */
static const char *signature(const char *s, const char *e) {
    for (const char *q = s; q < e; q++) {
        q = memchr(q, '[', (size_t)(e - q));
        if (!q) return NULL;
        const char *t = stamp_like(q, e);
        if (!t) continue;
        for (int sp = t < e && *t == ' '; sp >= 0; sp--) { /* " ?" greedy, then without */
            const char *m = t + sp;
            if (m >= e || *m == ' ') continue;
            if (*m != '[' || (m + 1 < e && !is_digit(m[1]))) return q;
        }
    }
    return NULL;
}

/* ---------------------------------------------------------------- event phrases
 * A phrase holds neither ", " nor ": ", so in a batch line it can only sit inside one key
 * or one value; canonical keys and typed values hold none, so only the others are read. */

typedef struct {
    const char **s;
    size_t *n;
    Py_ssize_t count;
    uint64_t pair[1024]; /* bit a*256+b set where some phrase starts with bytes a, b */
} phrases_t;

static inline int starts_pair(const phrases_t *ph, const char *q) {
    unsigned k = (unsigned)(uint8_t)q[0] << 8 | (uint8_t)q[1];
    return (int)(ph->pair[k >> 6] >> (k & 63) & 1);
}

/* one pass: only places where the first two bytes of some phrase stand are compared
 * further (phrases are at least two bytes long) */
static int has_phrase(const phrases_t *ph, const char *s, const char *e) {
    for (const char *q = s; q + 1 < e; q++) {
        if (!starts_pair(ph, q)) continue;
        for (Py_ssize_t i = 0; i < ph->count; i++)
            if (ph->s[i][0] == *q && (size_t)(e - q) >= ph->n[i]
                && memcmp(q, ph->s[i], ph->n[i]) == 0)
                return 1;
    }
    return 0;
}

/* The same, each phrase (given in lower case) compared with the line's letters in lower
 * case: on a plain line (printable ASCII) OR-ing 0x20 lowers a capital and changes no byte
 * that can equal a phrase's other bytes (digits, punctuation, space: only control bytes,
 * which a plain line lacks, would fold onto them). */
static int has_phrase_folded(const phrases_t *ph, const char *s, const char *e) {
    char pair[2];
    for (const char *q = s; q + 1 < e; q++) {
        pair[0] = (char)(q[0] | 0x20);
        pair[1] = (char)(q[1] | 0x20);
        if (!starts_pair(ph, pair)) continue;
        for (Py_ssize_t i = 0; i < ph->count; i++) {
            size_t n = ph->n[i], k = 0;
            if ((size_t)(e - q) < n) continue;
            while (k < n && (char)(q[k] | 0x20) == ph->s[i][k]) k++;
            if (k == n) return 1;
        }
    }
    return 0;
}

/* A request log's lines read here for no table but their stamps ("quiet" rows): its
 * "Receive: " lines, each a request's repr, which no table reads (a leader, no row), and
 * its "Finish: " lines, the request records, whose text the Python side reads (the
 * records' reader, records.py), skipping the polars parser's passes over their kilobytes.
 * Either is the polars parser's where it says an event phrase (``ph``) or what a run's era
 * features look for in any message (``any_line``, lower case: ``fastlane.ANY_LINE``); a
 * receipt also where it says a record-like word (``record_like``: the polars parser counts
 * such a line, not read, where a record is read).  0: neither; 1: a receipt; 2: a record. */
#define RECEIVE "Receive: "
#define FINISH "Finish: "
enum { Q_RECEIPT = 1, Q_RECORD = 2 };
static int quiet_kind(const char *msg, const char *e, const phrases_t *ph,
                      const phrases_t *any_line, const phrases_t *record_like) {
    size_t n = (size_t)(e - msg);
    int kind = n > sizeof RECEIVE - 1 && memcmp(msg, RECEIVE, sizeof RECEIVE - 1) == 0
                   ? Q_RECEIPT
               : n > sizeof FINISH - 1 && memcmp(msg, FINISH, sizeof FINISH - 1) == 0
                   ? Q_RECORD : 0;
    if (!kind || has_phrase(ph, msg, e) || has_phrase_folded(any_line, msg, e)) return 0;
    if (kind == Q_RECEIPT && has_phrase_folded(record_like, msg, e)) return 0;
    return kind;
}

/* ---------------------------------------------------------------- batch lines */

/* The typed columns a batch line fills (slots).  Which printed key fills which slot is
 * not written here: the polars lane's table (``batches.CANONICAL``, and its graph suffix)
 * is handed to every scan, and ``fastlane.py`` checks at import that these slots are its
 * columns with its types (``CANON_SLOTS``), so the two lanes read one table. */
enum { K_NEW_SEQ, K_NEW_TOKEN, K_CACHED, K_RUNNING, K_QUEUE, K_TOKEN, K_USAGE, K_GEN,
       K_INPUT, K_ACCEPT_LEN, K_ACCEPT_RATE, K_GRAPH, N_CANON };
static const int CANON_INT[N_CANON] = {1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0};

typedef struct {
    const char **s;
    size_t *n;
    int *slot;
    Py_ssize_t count;
    const char *suffix; /* a key ending in it is the graph flag ("cuda graph", "cpu graph") */
    size_t suffix_n;
} keys_t;

static int canon_of(const keys_t *kt, const char *k, size_t n) {
    for (Py_ssize_t i = 0; i < kt->count; i++)
        if (kt->n[i] == n && memcmp(k, kt->s[i], n) == 0) return kt->slot[i];
    if (n > kt->suffix_n && memcmp(k + n - kt->suffix_n, kt->suffix, kt->suffix_n) == 0)
        return K_GRAPH;
    return -1;
}

static int json_string(buf_t *b, const char *s, const char *e) {
    if (buf_byte(b, '"')) return -1;
    for (; s < e; s++) {
        if (*s == '\\' || *s == '"') {
            if (buf_byte(b, '\\')) return -1;
        }
        if (buf_byte(b, *s)) return -1;
    }
    return buf_byte(b, '"');
}

typedef struct {
    int kind; /* 0 prefill, 1 decode */
    int64_t iter;
    int iter_ok;
    int64_t mixed;
    int mixed_ok;
    int64_t ival[N_CANON];
    double fval[N_CANON];
    int present[N_CANON];
    int graph;
    const char *graph_key, *graph_key_end;
    buf_t extra; /* JSON text, reused between lines */
    int extra_pairs;
} batch_t;

#define HEAD_SCAN 96

/* 1 if msg..e is a batch line the fast lane reads exactly as the polars parser does */
static int parse_batch(const char *msg, const char *e, batch_t *b, const phrases_t *ph,
                       const keys_t *kt) {
    const char *q = msg;
    if (e - q >= 13 && memcmp(q, "Prefill batch", 13) == 0) { b->kind = 0; q += 13; }
    else if (e - q >= 12 && memcmp(q, "Decode batch", 12) == 0) { b->kind = 1; q += 12; }
    else return 0;
    b->mixed_ok = b->iter_ok = 0;
    static const char MIXED[] = "(mixed #running-req: ";
    if (e - q >= (ptrdiff_t)sizeof MIXED - 1 && memcmp(q, MIXED, sizeof MIXED - 1) == 0) {
        const char *v = q + sizeof MIXED - 1, *t = v;
        while (t < e && is_digit(*t)) t++;
        if (t >= e || *t != ')' || t == v || t - v > 18) return 0;
        b->mixed = digits(v, (int)(t - v));
        b->mixed_ok = 1;
        q = t + 1;
    }
    if (q < e && (*q == '[' || (*q == ' ' && q + 1 < e && q[1] == '['))) {
        const char *v = q + (*q == ' ' ? 2 : 1), *t = v;
        while (t < e && is_digit(*t)) t++;
        if (t >= e || *t != ']' || t == v || t - v > 18) return 0;
        b->iter = digits(v, (int)(t - v));
        b->iter_ok = 1;
        q = t + 1;
    }
    if (q >= e || (*q != '.' && *q != ',')) return 0;
    q++;
    if (q - msg > HEAD_SCAN) return 0;
    if (q < e && *q == ' ') q++;
    const char *be = e;
    while (be > q && (be[-1] == ',' || be[-1] == ' ')) be--;
    if (be == q) return 0; /* a reject: no fields */

    for (int k = 0; k < N_CANON; k++) b->present[k] = 0;
    b->extra.n = 0;
    b->extra_pairs = 0;
    if (buf_byte(&b->extra, '{')) return -1;
    const char *p = q;
    while (p < be) {
        /* one pass: the piece's ": ", then the ", " that ends it (the pieces are split on
         * ", " first: a ", " before any ": " ends a piece without one) */
        const char *colon = find_pair(p, be, 0), *pe;
        if (colon && *colon == ',') {
            pe = colon;
            colon = NULL;
        } else {
            pe = colon ? find_pair(colon + 2, be, ',') : NULL;
        }
        if (!pe) pe = be;
        if (pe > p) { /* empty pieces are dropped */
            if (!colon) return 0; /* a continuation piece or a reject */
            const char *ks = p, *ke = colon, *vs = colon + 2, *ve = pe;
            strip(&ks, &ke);
            strip(&vs, &ve);
            int c = canon_of(kt, ks, (size_t)(ke - ks));
            if ((c < 0 || c == K_GRAPH) && has_phrase(ph, ks, ke)) return 0;
            if (c < 0 && has_phrase(ph, vs, ve)) return 0;
            if (c >= 0) {
                if (memchr(vs, '=', (size_t)(ve - vs))) return 0; /* composite value */
                if (!b->present[c]) {
                    const char *xe = ve;
                    if (c != K_GRAPH && xe > vs && xe[-1] == '%') xe--;
                    if (c == K_GRAPH) {
                        if (xe - vs == 4 && memcmp(vs, "True", 4) == 0) b->graph = 1;
                        else if (xe - vs == 5 && memcmp(vs, "False", 5) == 0) b->graph = 0;
                        else return 0;
                        b->graph_key = ks;
                        b->graph_key_end = ke;
                    } else if (CANON_INT[c]) {
                        if (!parse_int(vs, (size_t)(xe - vs), &b->ival[c])) return 0;
                    } else {
                        if (!parse_float(vs, (size_t)(xe - vs), &b->fval[c])) return 0;
                    }
                    b->present[c] = 1;
                }
            } else {
                if (b->extra_pairs++ && buf_put(&b->extra, ", ", 2)) return -1;
                if (json_string(&b->extra, ks, ke) || buf_put(&b->extra, ": ", 2)) return -1;
                size_t n = (size_t)(ve - vs);
                size_t nn = (n && vs[n - 1] == '%') ? n - 1 : n;
                int rc;
                if (nn && is_number(vs, nn)) rc = buf_put(&b->extra, vs, nn);
                else if (n == 4 && memcmp(vs, "True", 4) == 0) rc = buf_put(&b->extra, "true", 4);
                else if (n == 5 && memcmp(vs, "False", 5) == 0) rc = buf_put(&b->extra, "false", 5);
                else if (n == 4 && memcmp(vs, "None", 4) == 0) rc = buf_put(&b->extra, "null", 4);
                else rc = json_string(&b->extra, vs, ve);
                if (rc) return -1;
            }
        }
        p = pe + 2;
    }
    if (buf_byte(&b->extra, '}')) return -1;
    return 1;
}

/* ---------------------------------------------------------------- HTTP access lines */

typedef struct {
    const char *client, *client_end, *method, *method_end, *path, *path_end, *proto,
        *proto_end, *text;
    int status, has_text;
} http_t;

/* ^INFO:\s+(\S+) - "([A-Z]+) (\S+) (HTTP/[\d.]+)" (\d{3})(?: (.*))?$ (spaces only) */
static int parse_http(const char *msg, const char *e, http_t *h) {
    const char *q = msg;
    if (e - q >= 5 && memcmp(q, "INFO:", 5) == 0) q += 5;
    else if (e - q >= 8 && memcmp(q, "WARNING:", 8) == 0) q += 8;
    else return 0;
    if (q >= e || *q != ' ') return 0;
    while (q < e && *q == ' ') q++;
    h->client = q;
    while (q < e && *q != ' ') q++;
    if (q == h->client) return 0;
    h->client_end = q;
    if (e - q < 4 || memcmp(q, " - \"", 4) != 0) return 0;
    q += 4;
    h->method = q;
    while (q < e && *q >= 'A' && *q <= 'Z') q++;
    if (q == h->method || q >= e || *q != ' ') return 0;
    h->method_end = q++;
    h->path = q;
    while (q < e && *q != ' ') q++;
    if (q == h->path || q >= e) return 0;
    h->path_end = q++;
    if (e - q < 5 || memcmp(q, "HTTP/", 5) != 0) return 0;
    h->proto = q;
    q += 5;
    const char *v = q;
    while (q < e && (is_digit(*q) || *q == '.')) q++;
    if (q == v) return 0;
    h->proto_end = q;
    if (e - q < 6 || q[0] != '"' || q[1] != ' ') return 0;
    q += 2;
    if (!is_digit(q[0]) || !is_digit(q[1]) || !is_digit(q[2])) return 0;
    h->status = (int)digits(q, 3);
    q += 3;
    h->has_text = 0;
    if (q == e) return 1;
    if (*q != ' ') return 0;
    h->has_text = 1;
    h->text = q + 1;
    return 1;
}

/* ---------------------------------------------------------------- the scan */

enum { B_IDX, B_TS, B_MS, B_RANKTAG, B_TSRAW, B_DP, B_TP, B_PP, B_EP, B_KIND, B_ITER, B_MIXED,
       B_NEW_SEQ, B_NEW_TOKEN, B_CACHED, B_RUNNING, B_QUEUE, B_TOKEN, B_USAGE, B_GRAPH,
       B_GRAPH_LABEL, B_GEN, B_INPUT, B_ACCEPT_LEN, B_ACCEPT_RATE, B_EXTRA, B_SHAPE,
       B_MSG_OFF, B_MSG_LEN, B_KEEP, B_OUTER, NB };
static const char *B_NAMES[NB] = {
    "idx", "ts", "stamp", "rank_tag", "ts_raw", "dp_rank", "tp_rank", "pp_rank", "ep_rank",
    "kind", "forward_iter", "mixed_chunk", "new_seq", "new_token", "cached_token",
    "running_req", "queue_req", "num_token", "token_usage", "cuda_graph", "graph_label",
    "gen_throughput", "input_throughput", "accept_len", "accept_rate", "extra", "shape",
    "msg_off", "msg_len", "keep", "outer"};
static const int B_TYPES[NB] = {
    C_I64, C_I64, C_U8, C_STR, C_STR, C_I32, C_I32, C_I32, C_I32, C_U8, C_I64, C_U8, C_I64, C_I64,
    C_I64, C_I64, C_I64, C_I64, C_F64, C_U8, C_STR, C_F64, C_F64, C_F64, C_F64, C_STR, C_I64,
    C_I64, C_I64, C_U8, C_STR};

enum { H_IDX, H_TS, H_MS, H_RANKTAG, H_TSRAW, H_CLIENT, H_METHOD, H_PATH, H_PROTO, H_STATUS,
       H_TEXT, H_SHAPE, H_MSG_OFF, H_MSG_LEN, H_KEEP, H_OUTER, NH };
static const char *H_NAMES[NH] = {
    "idx", "ts", "stamp", "rank_tag", "ts_raw", "client", "method", "path", "protocol", "status",
    "status_text", "shape", "msg_off", "msg_len", "keep", "outer"};
static const int H_TYPES[NH] = {C_I64, C_I64, C_U8, C_STR, C_STR, C_STR, C_STR, C_STR, C_STR,
                                C_I32, C_STR, C_I64, C_I64, C_I64, C_U8, C_STR};

enum { Q_IDX, Q_TS, Q_MS, Q_RANKTAG, Q_TSRAW, Q_SHAPE, Q_MSG_OFF, Q_MSG_LEN, Q_KEEP, Q_OUTER,
       Q_KIND, Q_LINE_OFF, NQ };
static const char *Q_NAMES[NQ] = {"idx", "ts", "stamp", "rank_tag", "ts_raw", "shape",
                                  "msg_off", "msg_len", "keep", "outer", "kind", "line_off"};
static const int Q_TYPES[NQ] = {C_I64, C_I64, C_U8, C_STR, C_STR, C_I64, C_I64, C_I64, C_U8,
                                C_STR, C_U8, C_I64};

static const int CANON_COL[N_CANON] = {B_NEW_SEQ, B_NEW_TOKEN, B_CACHED, B_RUNNING, B_QUEUE,
                                       B_TOKEN, B_USAGE, B_GEN, B_INPUT, B_ACCEPT_LEN,
                                       B_ACCEPT_RATE, B_GRAPH};

static uint64_t prefix_shape(const prefix_t *p) {
    uint64_t h = 1469598103934665603ULL;
    h ^= (uint8_t)(p->stamp == NO_STAMP ? 'n' : '0' + (p->stamp & 1) + 2 * (p->stamp > 1));
    h *= 1099511628211ULL;
    h = shape_hash(h, p->ranks, p->ranks_end, p->line);
    h ^= '|';
    h *= 1099511628211ULL;
    return h;
}

/* The columns every fast row starts with: idx, ts, stamp, rank_tag, ts_raw (the text of a
 * time-only stamp, as the line has it: the slow parser keeps it so) */
static int put_head(col_t *c, size_t row, int64_t idx, const prefix_t *p) {
    int r = put_i64(&c[0], row, idx, 1);
    r |= put_i64(&c[1], row, p->ts_us, 1);
    r |= put_u8(&c[2], row, (uint8_t)p->stamp, 1);
    r |= put_str(&c[3], row, p->ranks, (size_t)(p->ranks_end - p->ranks), p->ranks_end > p->ranks);
    r |= put_str(&c[4], row, p->clock, p->clock ? (size_t)(p->clock_end - p->clock) : 0,
                 p->clock != NULL);
    return r;
}

/* ... and ends with: shape, msg_off, msg_len, keep */
static int put_tail(col_t *c, size_t row, const prefix_t *p, const char *data,
                    const char *msg, const char *e) {
    int r = put_i64(&c[0], row, (int64_t)shape_hash(prefix_shape(p), msg, e, p->line), 1);
    r |= put_i64(&c[1], row, (int64_t)(msg - data), 1);
    r |= put_i64(&c[2], row, (int64_t)(e - msg), 1);
    r |= put_u8(&c[3], row, 1, 1);
    return r;
}

static int put_outer(col_t *c, size_t row, const prefix_t *p) {
    return put_str(c, row, p->outer, p->outer ? (size_t)(p->outer_end - p->outer) : 0,
                   p->outer != NULL);
}

static int emit_batch(col_t *c, size_t row, int64_t idx, const prefix_t *p, const batch_t *b,
                      const char *data, const char *msg, const char *e) {
    int r = put_head(c, row, idx, p);  /* B_IDX .. B_TSRAW */
    for (int k = 0; k < 4; k++)
        r |= put_i32(&c[B_DP + k], row, p->rank[k] * p->rank_ok[k], p->rank_ok[k]);
    r |= put_u8(&c[B_KIND], row, (uint8_t)b->kind, 1);
    r |= put_i64(&c[B_ITER], row, b->iter_ok ? b->iter : 0, b->iter_ok);
    r |= put_u8(&c[B_MIXED], row, (uint8_t)b->mixed_ok, 1);
    for (int k = 0; k < N_CANON; k++) {
        col_t *col = &c[CANON_COL[k]];
        int ok = b->present[k];
        if (k == K_GRAPH) r |= put_u8(col, row, ok ? (uint8_t)b->graph : 0, ok);
        else if (CANON_INT[k]) {
            int64_t v = ok ? b->ival[k] : 0;
            if (k == K_RUNNING && !ok && b->mixed_ok) { v = b->mixed; ok = 1; }
            r |= put_i64(col, row, v, ok);
        } else r |= put_f64(col, row, ok ? b->fval[k] : 0.0, ok);
    }
    r |= put_str(&c[B_GRAPH_LABEL], row, b->graph_key, (size_t)(b->graph_key_end - b->graph_key),
                 b->present[K_GRAPH]);
    r |= put_str(&c[B_EXTRA], row, b->extra.p, b->extra.n, b->extra_pairs > 0);
    r |= put_tail(&c[B_SHAPE], row, p, data, msg, e);
    r |= put_outer(&c[B_OUTER], row, p);
    return r ? -1 : 0;
}

static int emit_http(col_t *c, size_t row, int64_t idx, const prefix_t *p, const http_t *h,
                     const char *data, const char *msg, const char *e) {
    int r = put_head(c, row, idx, p);  /* H_IDX .. H_TSRAW */
    r |= put_str(&c[H_CLIENT], row, h->client, (size_t)(h->client_end - h->client), 1);
    r |= put_str(&c[H_METHOD], row, h->method, (size_t)(h->method_end - h->method), 1);
    r |= put_str(&c[H_PATH], row, h->path, (size_t)(h->path_end - h->path), 1);
    r |= put_str(&c[H_PROTO], row, h->proto, (size_t)(h->proto_end - h->proto), 1);
    r |= put_i32(&c[H_STATUS], row, h->status, 1);
    r |= put_str(&c[H_TEXT], row, h->has_text ? h->text : e, h->has_text ? (size_t)(e - h->text) : 0,
                 h->has_text);
    r |= put_tail(&c[H_SHAPE], row, p, data, msg, e);
    r |= put_outer(&c[H_OUTER], row, p);
    return r ? -1 : 0;
}

/* A quiet line's row: its shape is its prefix's alone (the era features a quiet line
 * shows are its stamp's and rank tag's: its message has none, by quiet_kind) */
static int emit_quiet(col_t *c, size_t row, int64_t idx, const prefix_t *p, int kind,
                      const char *data, const char *line, const char *msg, const char *e) {
    int r = put_head(c, row, idx, p);  /* Q_IDX .. Q_TSRAW */
    r |= put_i64(&c[Q_SHAPE], row, (int64_t)prefix_shape(p), 1);
    r |= put_i64(&c[Q_MSG_OFF], row, (int64_t)(msg - data), 1);
    r |= put_i64(&c[Q_MSG_LEN], row, (int64_t)(e - msg), 1);
    r |= put_u8(&c[Q_KEEP], row, 1, 1);
    r |= put_outer(&c[Q_OUTER], row, p);
    r |= put_u8(&c[Q_KIND], row, (uint8_t)kind, 1);
    r |= put_i64(&c[Q_LINE_OFF], row, (int64_t)(line - data), 1);
    return r ? -1 : 0;
}

static int ends_with_ray_repeat(const char *s, const char *e) {
    while (e > s && e[-1] == ' ') e--;
    return e - s >= 15 && memcmp(e - 15, "across cluster]", 15) == 0;
}

/* Hand line idx (s..e) to the slow parser; keep: the keep flag of that line's fast row,
 * cleared (the slow parser's row of the line stands instead). */
static int hand_on(char *keep, col_t *slow_idx, buf_t *slow, int64_t idx, const char *s,
                   const char *e) {
    if (keep) *keep = 0;
    if (append_i64(slow_idx, idx) || buf_put(slow, s, (size_t)(e - s))) return -1;
    return buf_byte(slow, '\n');
}

/* The phrases of a tuple of bytes (each two bytes long at least; ``folded``: in lower
 * case, for has_phrase_folded).  0, or -1 with the error set. */
static int phrases_from(PyObject *tuple, phrases_t *ph, int folded) {
    ph->count = PyTuple_GET_SIZE(tuple);
    ph->s = calloc((size_t)ph->count + 1, sizeof *ph->s);
    ph->n = calloc((size_t)ph->count + 1, sizeof *ph->n);
    if (!ph->s || !ph->n) { PyErr_NoMemory(); return -1; }
    for (Py_ssize_t i = 0; i < ph->count; i++) {
        PyObject *o = PyTuple_GET_ITEM(tuple, i);
        if (!PyBytes_Check(o)) { PyErr_SetString(PyExc_TypeError, "phrases must be bytes"); return -1; }
        ph->s[i] = PyBytes_AS_STRING(o);
        ph->n[i] = (size_t)PyBytes_GET_SIZE(o);
        if (ph->n[i] < 2) { PyErr_SetString(PyExc_ValueError, "phrase shorter than 2 bytes"); return -1; }
        for (size_t k = 0; folded && k < ph->n[i]; k++)
            if ((ph->s[i][k] | 0x20) != ph->s[i][k] || (uint8_t)ph->s[i][k] >= 0x7f) {
                PyErr_SetString(PyExc_ValueError, "a folded phrase must be lower case");
                return -1;
            }
        unsigned k = (unsigned)(uint8_t)ph->s[i][0] << 8 | (uint8_t)ph->s[i][1];
        ph->pair[k >> 6] |= (uint64_t)1 << (k & 63);
    }
    return 0;
}

static PyObject *scan(PyObject *self, PyObject *args) {
    (void)self;
    Py_buffer view;
    PyObject *phrase_tuple, *key_tuple, *any_tuple, *like_tuple;
    const char *suffix;
    Py_ssize_t suffix_n;
    if (!PyArg_ParseTuple(args, "y*O!O!y#O!O!", &view, &PyTuple_Type, &phrase_tuple,
                          &PyTuple_Type, &key_tuple, &suffix, &suffix_n, &PyTuple_Type,
                          &any_tuple, &PyTuple_Type, &like_tuple))
        return NULL;
    phrases_t ph = {0}, any_line = {0}, record_like = {0};
    int phrases_ok = !phrases_from(phrase_tuple, &ph, 0) && !phrases_from(any_tuple, &any_line, 1)
                     && !phrases_from(like_tuple, &record_like, 1);
    keys_t kt = {0};
    kt.count = PyTuple_GET_SIZE(key_tuple);
    kt.s = calloc((size_t)kt.count + 1, sizeof *kt.s);
    kt.n = calloc((size_t)kt.count + 1, sizeof *kt.n);
    kt.slot = calloc((size_t)kt.count + 1, sizeof *kt.slot);
    kt.suffix = suffix;
    kt.suffix_n = (size_t)suffix_n;
    col_t bc[NB], hc[NH], qc[NQ], slow_idx;
    buf_t slow = {0};
    batch_t b;
    memset(&b, 0, sizeof b);
    int ok = phrases_ok && kt.s && kt.n && kt.slot;
    if (ok && suffix_n < 1) { PyErr_SetString(PyExc_ValueError, "empty graph suffix"); ok = 0; }
    for (Py_ssize_t i = 0; ok && i < kt.count; i++) {
        PyObject *o = PyTuple_GET_ITEM(key_tuple, i), *key, *slot;
        if (!PyTuple_Check(o) || PyTuple_GET_SIZE(o) != 2
            || !PyBytes_Check(key = PyTuple_GET_ITEM(o, 0))
            || !PyLong_Check(slot = PyTuple_GET_ITEM(o, 1))) {
            PyErr_SetString(PyExc_TypeError, "keys must be (bytes, slot) pairs");
            ok = 0;
            break;
        }
        long v = PyLong_AsLong(slot);
        if (v < 0 || v >= K_GRAPH) {  /* the graph flag is found by its suffix */
            if (!PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "key slot out of range");
            ok = 0;
            break;
        }
        kt.s[i] = PyBytes_AS_STRING(key);
        kt.n[i] = (size_t)PyBytes_GET_SIZE(key);
        kt.slot[i] = (int)v;
    }
    const char *data = view.buf, *end = data + view.len, *s = data;
    size_t rows;
    Py_BEGIN_ALLOW_THREADS
    rows = block_rows(data, end);
    Py_END_ALLOW_THREADS
    memset(bc, 0, sizeof bc);
    memset(hc, 0, sizeof hc);
    memset(qc, 0, sizeof qc);
    memset(&slow_idx, 0, sizeof slow_idx);
    for (int k = 0; ok && k < NB; k++) ok = !col_init(&bc[k], B_NAMES[k], B_TYPES[k], rows);
    for (int k = 0; ok && k < NH; k++) ok = !col_init(&hc[k], H_NAMES[k], H_TYPES[k], rows);
    /* (quiet lines are none of most logs, a fraction of a request log's: grown as found) */
    for (int k = 0; ok && k < NQ; k++) ok = !col_init_small(&qc[k], Q_NAMES[k], Q_TYPES[k], 64);
    if (ok) ok = !col_init(&slow_idx, "idx", C_I64, rows);

    int64_t idx = 0, lines = 0;
    int prev_lane = 0; /* 0 slow, 1 batch, 2 http, 3 quiet */
    const char *prev_s = NULL, *prev_e = NULL;
    int failed = !ok;
    size_t nb = 0, nh = 0, nq = 0; /* rows of the batch, HTTP and quiet tables */
    Py_BEGIN_ALLOW_THREADS
    while (!failed && s < end) {
        if (nb >= rows || nh >= rows || nq >= rows) { failed = 1; break; } /* one row a line */
        int plain;
        const char *e = line_end(s, end, &plain);
        const char *next = e < end ? e + 1 : end;
        int lane = 0;
        prefix_t p;
        /* where SGLang's stamp starts: the line's start, or after a wrapper */
        const char *br = NULL, *outer = NULL;
        if (plain && e - s > 12) {
            if (s[0] == '[') br = s;
            else if (is_digit(s[0])) br = docker_stamp(s, e);
            else if (is_alpha(s[0]) && (br = signature(s, e)) != NULL) outer = s;
        }
        int stamped = 0; /* SGLang's prefix read (at the start, or dated after a wrapper) */
        if (br && e - br > 12 && br[0] == '[' && parse_prefix(br, e, &p)
            && (br == s || (p.stamp & 1)) && !ends_with_ray_repeat(p.msg, e)) {
            stamped = 1;
            p.outer = outer;
            if (outer) {
                p.outer_end = br;
                while (p.outer_end > outer && p.outer_end[-1] == ' ') p.outer_end--;
            }
            int r = parse_batch(p.msg, e, &b, &ph, &kt), kind;
            if (r < 0) { failed = 1; break; }
            if (r == 1) {
                if (emit_batch(bc, nb++, idx, &p, &b, data, p.msg, e)) { failed = 1; break; }
                lane = 1;
            } else {
                http_t h;
                if (parse_http(p.msg, e, &h)
                    && !(h.has_text && has_phrase(&ph, h.text, e))) {
                    if (emit_http(hc, nh++, idx, &p, &h, data, p.msg, e)) { failed = 1; break; }
                    lane = 2;
                } else if ((kind = quiet_kind(p.msg, e, &ph, &any_line, &record_like)) != 0) {
                    if (cols_room(qc, NQ, nq)
                        || emit_quiet(qc, nq++, idx, &p, kind, data, s, p.msg, e)) {
                        failed = 1;
                        break;
                    }
                    lane = 3;
                }
            }
        }
        else if (!outer && (s[0] == 'I' || s[0] == 'W') && plain && !ends_with_ray_repeat(s, e)) {
            /* uvicorn's own access lines carry no SGLang prefix (and so no time) */
            http_t h;
            memset(&p, 0, sizeof p);
            p.stamp = NO_STAMP;
            p.ranks = p.ranks_end = p.msg = p.line = s;
            if (parse_http(s, e, &h) && !(h.has_text && has_phrase(&ph, h.text, e))) {
                if (emit_http(hc, nh++, idx, &p, &h, data, s, e)) { failed = 1; break; }
                lane = 2;
            }
        }
        if (lane == 0) {
            /* the fast line before a slow one is read by both, where the slow one may
             * continue it; a line that starts with docker's stamp or SGLang's never does,
             * nor one whose SGLang prefix was read after a wrapper (journald's): the
             * stamp makes it a leader of its own (prefix.split_prefixes' has_prefix), so
             * its context is not read twice (in a log of request records, a third of its
             * batch and access lines were; behind journald, the access line before each
             * stamped warning) */
            int leads = plain && (stamped
                                  || (is_digit(s[0]) && docker_stamp(s, e) != NULL)
                                  || (s[0] == '[' && stamp_like(s, e) != NULL));
            char *keep = prev_lane == 1 ? &bc[B_KEEP].data.p[nb - 1]
                         : prev_lane == 2 ? &hc[H_KEEP].data.p[nh - 1]
                         : prev_lane == 3 ? &qc[Q_KEEP].data.p[nq - 1] : NULL;
            if (prev_lane && !leads && hand_on(keep, &slow_idx, &slow, idx - 1, prev_s, prev_e)) {
                failed = 1;
                break;
            }
            if (hand_on(NULL, &slow_idx, &slow, idx, s, e)) { failed = 1; break; }
        }
        prev_lane = lane;
        prev_s = s;
        prev_e = e;
        idx++;
        s = next;
    }
    lines = idx;
    col_rows(bc, NB, nb);
    col_rows(hc, NH, nh);
    col_rows(qc, NQ, nq);
    Py_END_ALLOW_THREADS

    PyObject *out = NULL;
    if (!failed) {
        PyObject *bd = cols_to_dict(bc, B_NAMES, NB);
        PyObject *hd = bd ? cols_to_dict(hc, H_NAMES, NH) : NULL;
        PyObject *qd = hd ? cols_to_dict(qc, Q_NAMES, NQ) : NULL;
        if (bd && hd && qd)
            out = Py_BuildValue("{s:N,s:N,s:N,s:y#,s:N,s:L}", "batch", bd, "http", hd, "quiet",
                                qd, "slow", slow.p ? slow.p : "", (Py_ssize_t)slow.n,
                                "slow_idx", buf_take(&slow_idx.data), "lines", (long long)lines);
        else {
            Py_XDECREF(bd);
            Py_XDECREF(hd);
            Py_XDECREF(qd);
        }
    } else if (!PyErr_Occurred()) {
        PyErr_NoMemory();
    }
    for (int k = 0; k < NB; k++) col_free(&bc[k]);
    for (int k = 0; k < NH; k++) col_free(&hc[k]);
    for (int k = 0; k < NQ; k++) col_free(&qc[k]);
    col_free(&slow_idx);
    free(slow.p);
    free(b.extra.p);
    free(ph.s);
    free(ph.n);
    free(any_line.s);
    free(any_line.n);
    free(record_like.s);
    free(record_like.n);
    free(kt.s);
    free(kt.n);
    free(kt.slot);
    PyBuffer_Release(&view);
    return out;
}

static PyMethodDef methods[] = {
    COUNT_LINES_METHOD,
    {"scan", scan, METH_VARARGS,
     "scan(data, phrases, keys, graph_suffix, any_line, record_like) -> dict: fast-lane "
     "batch, HTTP and quiet rows of a block of complete lines, and the text of the lines "
     "left to the polars parser; keys are (printed key, slot) pairs (slots: CANON_SLOTS)."},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_fastlane",
                                    "One-pass C reader of plain SGLang batch and access lines.",
                                    -1, methods, NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__fastlane(void) {
    PyObject *m = PyModule_Create(&module);
    if (!m) return NULL;
    /* the slots in order: (column, "int" | "float" | "bool") */
    PyObject *slots = PyTuple_New(N_CANON);
    for (int k = 0; slots && k < N_CANON; k++) {
        const char *type = k == K_GRAPH ? "bool" : CANON_INT[k] ? "int" : "float";
        PyObject *item = Py_BuildValue("(ss)", B_NAMES[CANON_COL[k]], type);
        if (!item) { Py_CLEAR(slots); break; }
        PyTuple_SET_ITEM(slots, k, item);
    }
    /* (PyModule_AddObjectRef takes no reference: each is released here, added or not) */
    PyObject *objs[] = {slots, column_table(B_NAMES, B_TYPES, NB),
                        column_table(H_NAMES, H_TYPES, NH), column_table(Q_NAMES, Q_TYPES, NQ)};
    const char *names[] = {"CANON_SLOTS", "BATCH_COLUMNS", "HTTP_COLUMNS", "QUIET_COLUMNS"};
    int ok = 1;
    for (int k = 0; k < 4; k++)
        ok = ok && objs[k] != NULL && PyModule_AddObjectRef(m, names[k], objs[k]) == 0;
    for (int k = 0; k < 4; k++) Py_XDECREF(objs[k]);
    if (!ok) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
