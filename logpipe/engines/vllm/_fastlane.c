/* The fast lane of the vLLM log parser: one pass in C over a block of complete lines.
 *
 * A busy vLLM server's log is mostly uvicorn's access lines, one a request, with a stats
 * line (and, speculating, a SpecDecoding line) every few seconds.  scan_access(data) reads
 * into columns:
 *
 * - the plain access lines of a block -- exactly the lines logparser.PLAIN_ACCESS matches
 *   (alone on their line or behind ``docker logs --timestamps``, no colour, no bracket, a
 *   status text of words), less the profiler's two POSTs, which are also events;
 * - the stats lines V1 prints by default and the SpecDecoding lines of 0.10.2/0.11 to 0.33,
 *   in the one form each the line parser reads by one match (parser.STATS_V1,
 *   parser.SPEC_V1), under vLLM's own prefix (INFO, ``[file.py:N]``, with or without the
 *   process prefix ``(APIServer pid=N)``), alone on their line or behind docker's stamp:
 *   their values as the line parser reads them (numbers as Python's float() reads them,
 *   a percentage as parser._pct rounds it).  What follows the file -- the year of a stamp,
 *   the run, which stats line a spec line goes with -- is left to
 *   logparser.VLLMLogParser.finish, which takes them in line order with the other lines;
 *
 * and returns every other line as text for the line parser (logpipe/engines/vllm/
 * parser.py).  A line with a control character (a carriage return included) or a byte
 * outside ASCII is left to the line parser too, and so is any line of those shapes the
 * lane is not sure the line parser reads the same way (a second prefix possible, a lost
 * colour code, a number too long to read exactly).  The rows are those the line parser
 * gives for the same lines (tests/test_vllm_fastlane.py compares both lanes on every
 * sample and on edge lines).
 *
 * scan_access(data) -> {"access": {column: (values, validity, offsets)}, "stats": {...},
 * "spec": {...}, "per_position": {...}, "slow": bytes, "slow_idx": bytes (int64 line
 * indexes), "lines": int}
 */
#include "../columns.h"

enum { A_IDX, A_OFF, A_LEN, A_CLIENT, A_METHOD, A_PATH, A_PROTO, A_STATUS, A_TEXT, NA };
static const char *A_NAMES[NA] = {"idx", "off", "len", "client", "method", "path", "protocol",
                                  "status", "status_text"};
static const int A_TYPES[NA] = {C_I64, C_I64, C_I64, C_STR, C_STR, C_STR, C_STR, C_I32, C_STR};

static inline int is_client_char(char c) {
    return is_digit(c) || is_alpha(c) || c == '.' || c == '_' || c == ':' || c == '-';
}

/* docker's RFC 3339 stamp and its space: \d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?Z
 * Returns the byte after it, or s where there is none. */
static const char *skip_docker(const char *s, const char *e) {
    static const char shape[] = "dddd-dd-ddTdd:dd:dd";
    if (e - s < 21) return s;
    for (int i = 0; i < 19; i++) {
        if (shape[i] == 'd' ? !is_digit(s[i]) : s[i] != shape[i]) return s;
    }
    const char *q = s + 19;
    if (q < e && *q == '.') {
        const char *d = ++q;
        while (q < e && is_digit(*q)) q++;
        if (q == d) return s;
    }
    if (e - q < 2 || q[0] != 'Z' || q[1] != ' ') return s;
    return q + 2;
}

typedef struct {
    const char *client, *client_end, *method, *method_end, *path, *path_end, *proto,
        *proto_end, *text, *text_end;
    int status;
} access_t;

/* One plain line (s..e: ASCII, no control byte) against PLAIN_ACCESS. */
static int parse_access(const char *s, const char *e, access_t *a) {
    const char *q = skip_docker(s, e);
    if (e - q < 6 || memcmp(q, "INFO: ", 6) != 0) return 0;
    q += 5;
    while (q < e && *q == ' ') q++;
    /* client:port, the port the digits after the span's last colon */
    a->client = q;
    while (q < e && is_client_char(*q)) q++;
    a->client_end = q;
    const char *colon = q;
    while (colon > a->client && colon[-1] != ':') colon--;
    if (colon <= a->client + 1 || colon == q) return 0; /* no client, or no port digits */
    for (const char *d = colon; d < q; d++)
        if (!is_digit(*d)) return 0;
    if (e - q < 4 || memcmp(q, " - \"", 4) != 0) return 0;
    q += 4;
    a->method = q;
    while (q < e && *q >= 'A' && *q <= 'Z') q++;
    if (q == a->method || q >= e || *q != ' ') return 0;
    a->method_end = q++;
    a->path = q;
    while (q < e && *q != ' ' && *q != '"' && *q != '[') q++;
    if (q == a->path || q >= e || *q != ' ') return 0;
    a->path_end = q++;
    if (e - q < 5 || memcmp(q, "HTTP/", 5) != 0) return 0;
    a->proto = q;
    q += 5;
    const char *v = q;
    while (q < e && (is_digit(*q) || *q == '.')) q++;
    if (q == v) return 0;
    a->proto_end = q;
    if (e - q < 5 || q[0] != '"' || q[1] != ' ') return 0;
    q += 2;
    if (!is_digit(q[0]) || !is_digit(q[1]) || !is_digit(q[2])) return 0;
    a->status = (q[0] - '0') * 100 + (q[1] - '0') * 10 + (q[2] - '0');
    q += 3;
    a->text = a->text_end = q;
    if (q == e) return 1;
    if (*q != ' ') return 0;
    for (const char *t = q + 1; t < e; t++)
        if (!is_alpha(*t) && *t != ' ') return 0;
    /* the status text stripped of its spaces */
    a->text = q + 1;
    a->text_end = e;
    while (a->text < a->text_end && *a->text == ' ') a->text++;
    while (a->text_end > a->text && a->text_end[-1] == ' ') a->text_end--;
    return 1;
}

static int is_profiler(const access_t *a) {
    size_t m = (size_t)(a->method_end - a->method), n = (size_t)(a->path_end - a->path);
    if (m != 4 || memcmp(a->method, "POST", 4) != 0) return 0;
    return (n == 14 && memcmp(a->path, "/start_profile", 14) == 0)
           || (n == 13 && memcmp(a->path, "/stop_profile", 13) == 0);
}

static int emit(col_t *c, size_t row, int64_t idx, const char *data, const char *s,
                const char *e, const access_t *a) {
    int r = put_i64(&c[A_IDX], row, idx, 1);
    r |= put_i64(&c[A_OFF], row, (int64_t)(s - data), 1);
    r |= put_i64(&c[A_LEN], row, (int64_t)(e - s), 1);
    r |= put_str(&c[A_CLIENT], row, a->client, (size_t)(a->client_end - a->client), 1);
    r |= put_str(&c[A_METHOD], row, a->method, (size_t)(a->method_end - a->method), 1);
    r |= put_str(&c[A_PATH], row, a->path, (size_t)(a->path_end - a->path), 1);
    r |= put_str(&c[A_PROTO], row, a->proto, (size_t)(a->proto_end - a->proto), 1);
    r |= put_i32(&c[A_STATUS], row, a->status, 1);
    r |= put_str(&c[A_TEXT], row, a->text, (size_t)(a->text_end - a->text),
                 a->text_end > a->text);
    return r ? -1 : 0;
}

/* ---------------------------------------------------------------- stats and spec lines */

enum { S_IDX, S_OFF, S_LEN, S_WY, S_WM, S_TS, S_ENGINE, S_PROMPT, S_GEN, S_RUNNING, S_WAITING,
       S_DEV, S_KV, S_PREFIX, NS };
static const char *S_NAMES[NS] = {"idx", "off", "len", "wrapper_year", "wrapper_month",
                                  "ts_raw", "engine_index", "prompt_tps", "gen_tps", "running",
                                  "waiting", "kv_device", "kv_usage", "prefix_hit_rate"};
static const int S_TYPES[NS] = {C_I64, C_I64, C_I64, C_I32, C_I32, C_STR, C_I32, C_F64, C_F64,
                                C_I64, C_I64, C_STR, C_F64, C_F64};

enum { P_IDX, P_OFF, P_LEN, P_WY, P_WM, P_TS, P_ENGINE, P_MEAN, P_ACC_TPS, P_DRF_TPS, P_ACC,
       P_DRF, P_RATE, P_PP_N, NP };
static const char *P_NAMES[NP] = {"idx", "off", "len", "wrapper_year", "wrapper_month",
                                  "ts_raw", "engine_index", "mean_acceptance_length",
                                  "accepted_tps", "drafted_tps", "accepted_tokens",
                                  "drafted_tokens", "acceptance_rate", "per_position_n"};
static const int P_TYPES[NP] = {C_I64, C_I64, C_I64, C_I32, C_I32, C_STR, C_I32, C_F64, C_F64,
                                C_F64, C_I64, C_I64, C_F64, C_I64};

static const char *PP_NAMES[1] = {"value"};

static const double POW10[] = {1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10,
                               1e11, 1e12, 1e13, 1e14, 1e15};

static inline int lit(const char **q, const char *e, const char *text, size_t n) {
    if ((size_t)(e - *q) < n || memcmp(*q, text, n) != 0) return 0;
    *q += n;
    return 1;
}
#define LIT(q, e, s) lit(&(q), (e), (s), sizeof(s) - 1)

/* parser.NUM (nan|-?\d+(?:\.\d+)?) at *q, read as parser._num reads it (float(text); nan:
 * no value) or, with pct, as parser._pct does (round(float(text) / 100, 6)).  Returns 0
 * where there is no number, or one this lane does not read exactly (the line then goes to
 * the line parser).  At most 15 digits: the integer and the power of ten are exact doubles,
 * so one division is correctly rounded, as float() is.  A percentage of at most 4 decimals
 * and 9 digits: float(text) / 100 lies within an ulp or two of the decimal m / 10^(d+2),
 * which has at most 6 decimals, so round(..., 6) gives the double nearest that decimal:
 * m / 10^(d+2), one division. */
static int read_num(const char **q, const char *e, double *v, int *valid, int pct) {
    const char *p = *q;
    if (e - p >= 3 && memcmp(p, "nan", 3) == 0) {
        *q = p + 3;
        *valid = 0;
        *v = 0;
        return 1;
    }
    int neg = p < e && *p == '-';
    p += neg;
    uint64_t m = 0;
    int nd = 0, frac = 0;
    const char *d = p;
    while (p < e && is_digit(*p)) { m = m * 10 + (uint64_t)(*p - '0'); p++; nd++; if (nd > 15) return 0; }
    if (p == d) return 0;
    if (p + 1 < e && *p == '.' && is_digit(p[1])) {
        p++;
        while (p < e && is_digit(*p)) {
            m = m * 10 + (uint64_t)(*p - '0');
            p++;
            nd++;
            frac++;
            if (nd > 15) return 0;
        }
    }
    if (pct && (frac > 4 || nd > 9)) return 0;
    double x = (double)m / POW10[pct ? frac + 2 : frac];
    *v = neg ? -x : x;
    *valid = 1;
    *q = p;
    return 1;
}

/* \d+ at *q as an int (at most 18 digits) */
static int read_int(const char **q, const char *e, int64_t *v) {
    const char *p = *q;
    int64_t x = 0;
    int nd = 0;
    while (p < e && is_digit(*p)) {
        if (++nd > 18) return 0;
        x = x * 10 + (*p - '0');
        p++;
    }
    if (nd == 0) return 0;
    *v = x;
    *q = p;
    return 1;
}

static inline int is_word_char(char c) { return is_digit(c) || is_alpha(c) || c == '_'; }

/* The stamp and place of a record under vLLM's prefix, where the line parser reads them. */
typedef struct {
    int wy, wm;           /* the year and month of docker's stamp in front (0: none) */
    const char *md, *msg; /* MM-DD HH:MM:SS (the seconds' fraction left out), the message */
} prefix_t;

/* The text of a plain line s..e up to vLLM's prefix, where the line parser's first match of
 * parser.PREFIX is there and is its only one: nothing in front but docker's stamp, the
 * process prefix (if any) whole, the level INFO.  Returns 0 for any other line. */
static int read_prefix(const char *s, const char *e, prefix_t *px) {
    const char *q = skip_docker(s, e);
    px->wy = px->wm = 0;
    if (q != s && s[0] == '2' && s[1] == '0') { /* parser.WRAPPER_DATE: (20\d\d)-(\d\d)-... */
        px->wy = (s[0] - '0') * 1000 + (s[1] - '0') * 100 + (s[2] - '0') * 10 + (s[3] - '0');
        px->wm = (s[5] - '0') * 10 + (s[6] - '0');
    }
    if (q < e && *q == '(') { /* \((?P<proc>[A-Za-z_][\w\[\]]*?) (?:rank=\d+ )?pid=\d+(, ip=[^)]*)?\)\s+ */
        q++;
        if (q >= e || !(is_alpha(*q) || *q == '_')) return 0;
        while (q < e && (is_word_char(*q) || *q == '[' || *q == ']')) q++;
        if (!LIT(q, e, " ")) return 0;
        int64_t n;
        if (LIT(q, e, "rank=")) {
            if (!read_int(&q, e, &n) || !LIT(q, e, " ")) return 0;
        }
        if (!LIT(q, e, "pid=") || !read_int(&q, e, &n)) return 0;
        if (LIT(q, e, ", ip=")) {
            while (q < e && *q != ')') q++;
        }
        if (!LIT(q, e, ")") || q >= e || *q != ' ') return 0;
        while (q < e && *q == ' ') q++;
    }
    if (!LIT(q, e, "INFO ")) return 0;
    while (q < e && *q == ' ') q++;
    /* (?P<md>\d\d-\d\d) (?P<hms>\d\d:\d\d:\d\d)(?:\.\d+)? */
    static const char shape[] = "dd-dd dd:dd:dd";
    if (e - q < 14) return 0;
    for (int i = 0; i < 14; i++)
        if (shape[i] == 'd' ? !is_digit(q[i]) : q[i] != shape[i]) return 0;
    px->md = q;
    q += 14;
    if (q + 1 < e && *q == '.' && is_digit(q[1])) {
        q++;
        while (q < e && is_digit(*q)) q++;
    }
    /*  \[?(?P<file>[\w./-]+\.py):(?P<lineno>\d+)\]  */
    if (!LIT(q, e, " ")) return 0;
    LIT(q, e, "[");
    const char *f = q;
    while (q < e && (is_word_char(*q) || *q == '.' || *q == '/' || *q == '-')) q++;
    if (q - f < 4 || memcmp(q - 3, ".py", 3) != 0) return 0;
    int64_t n;
    if (!LIT(q, e, ":") || !read_int(&q, e, &n) || !LIT(q, e, "] ")) return 0;
    px->msg = q;
    return 1;
}

/* (?:Engine (?P<idx>\d{3}): )? */
static void read_engine(const char **q, const char *e, int *engine, int *has) {
    const char *p = *q;
    *has = 0;
    if (LIT(p, e, "Engine ") && e - p >= 5 && is_digit(p[0]) && is_digit(p[1])
        && is_digit(p[2]) && p[3] == ':' && p[4] == ' ') {
        *engine = (p[0] - '0') * 100 + (p[1] - '0') * 10 + (p[2] - '0');
        *has = 1;
        *q = p + 5;
    }
}

typedef struct {
    int engine, has_engine, prompt_ok, gen_ok, kv_ok, prefix_ok;
    double prompt, gen, kv, prefix;
    int64_t running, waiting;
    const char *dev, *dev_end;
} stats_t;

/* The message (q..e, its trailing spaces stripped) against parser.STATS_V1, whole */
static int read_stats(const char *q, const char *e, stats_t *st) {
    read_engine(&q, e, &st->engine, &st->has_engine);
    if (!LIT(q, e, "Avg prompt throughput: ")
        || !read_num(&q, e, &st->prompt, &st->prompt_ok, 0)
        || !LIT(q, e, " tokens/s, Avg generation throughput: ")
        || !read_num(&q, e, &st->gen, &st->gen_ok, 0)
        || !LIT(q, e, " tokens/s, Running: ") || !read_int(&q, e, &st->running)
        || !LIT(q, e, " reqs, Waiting: ") || !read_int(&q, e, &st->waiting)
        || !LIT(q, e, " reqs, "))
        return 0;
    st->dev = q;
    while (q < e && *q >= 'A' && *q <= 'Z') q++;
    st->dev_end = q;
    size_t nd = (size_t)(q - st->dev);
    /* (a device named INFO would be a level name in the message: the line parser then
     * looks for a second prefix) */
    if (nd < 2 || nd > 4 || (nd == 4 && memcmp(st->dev, "INFO", 4) == 0)) return 0;
    if (!LIT(q, e, " KV cache usage: ") || !read_num(&q, e, &st->kv, &st->kv_ok, 1)
        || !LIT(q, e, "%"))
        return 0;
    st->prefix_ok = 0;
    st->prefix = 0;
    if (q < e) {
        if (!LIT(q, e, ", Prefix cache hit rate: ")
            || !read_num(&q, e, &st->prefix, &st->prefix_ok, 1) || !LIT(q, e, "%"))
            return 0;
    }
    return q == e;
}

typedef struct {
    int engine, has_engine, mean_ok, acc_tps_ok, drf_tps_ok, rate_ok;
    double mean, acc_tps, drf_tps, rate;
    int64_t accepted, drafted;
    const char *pp, *pp_end;
} spec_t;

/* The message (q..e) as "SpecDecoding metrics:" and parser.SPEC_V1, whole, the
 * per-position rates each followed by ", " (the line parser's findall then reads each
 * of them as the match does) */
static int read_spec(const char *q, const char *e, spec_t *sp) {
    if (!LIT(q, e, "SpecDecoding metrics:")) return 0;
    while (q < e && *q == ' ') q++;
    read_engine(&q, e, &sp->engine, &sp->has_engine);
    int64_t n;
    if (!LIT(q, e, "Mean acceptance length: ")
        || !read_num(&q, e, &sp->mean, &sp->mean_ok, 0)
        || !LIT(q, e, ", Accepted throughput: ")
        || !read_num(&q, e, &sp->acc_tps, &sp->acc_tps_ok, 0)
        || !LIT(q, e, " tokens/s, Drafted throughput: ")
        || !read_num(&q, e, &sp->drf_tps, &sp->drf_tps_ok, 0)
        || !LIT(q, e, " tokens/s, Accepted: ") || !read_int(&q, e, &sp->accepted)
        || !LIT(q, e, " tokens, Drafted: ") || !read_int(&q, e, &sp->drafted)
        || !LIT(q, e, " tokens, Per-position acceptance rate: "))
        return 0;
    sp->pp = q;
    int rates = 0;
    while (q < e && (is_digit(*q) || *q == '-' || *q == 'n')) {
        double v;
        int ok;
        if (!read_num(&q, e, &v, &ok, 0) || !LIT(q, e, ", ")) return 0;
        rates++;
    }
    sp->pp_end = q;
    if (!rates || !LIT(q, e, "Avg Draft acceptance rate: ")
        || !read_num(&q, e, &sp->rate, &sp->rate_ok, 1) || !LIT(q, e, "%"))
        return 0;
    (void)n;
    return q == e;
}

/* A line the line parser would read under its one prefix, with no colour code it would
 * strip first (a lost one is "[<digit>") */
static int has_lost_colour(const char *s, const char *e) {
    for (const char *q = s; q + 1 < e; q++) {
        q = memchr(q, '[', (size_t)(e - 1 - q));
        if (!q) return 0;
        if (is_digit(q[1])) return 1;
    }
    return 0;
}

static int put_stamp(col_t *c, size_t row, int64_t idx, const char *data, const char *s,
                     const char *e, const prefix_t *px) {
    put_i64(&c[0], row, idx, 1);
    put_i64(&c[1], row, (int64_t)(s - data), 1);
    put_i64(&c[2], row, (int64_t)(e - s), 1);
    put_i32(&c[3], row, px->wy, px->wy != 0);
    put_i32(&c[4], row, px->wm, px->wy != 0);
    return put_str(&c[5], row, px->md, 14, 1);
}

static int emit_stats(col_t *c, size_t row, int64_t idx, const char *data, const char *s,
                      const char *e, const prefix_t *px, const stats_t *st) {
    int r = put_stamp(c, row, idx, data, s, e, px);
    put_i32(&c[S_ENGINE], row, st->engine, st->has_engine);
    put_f64(&c[S_PROMPT], row, st->prompt, st->prompt_ok);
    put_f64(&c[S_GEN], row, st->gen, st->gen_ok);
    put_i64(&c[S_RUNNING], row, st->running, 1);
    put_i64(&c[S_WAITING], row, st->waiting, 1);
    r |= put_str(&c[S_DEV], row, st->dev, (size_t)(st->dev_end - st->dev), 1);
    put_f64(&c[S_KV], row, st->kv, st->kv_ok);
    put_f64(&c[S_PREFIX], row, st->prefix, st->prefix_ok);
    return r ? -1 : 0;
}

static int emit_spec(col_t *c, col_t *pp, size_t row, int64_t idx, const char *data,
                     const char *s, const char *e, const prefix_t *px, const spec_t *sp) {
    int r = put_stamp(c, row, idx, data, s, e, px);
    put_i32(&c[P_ENGINE], row, sp->engine, sp->has_engine);
    put_f64(&c[P_MEAN], row, sp->mean, sp->mean_ok);
    put_f64(&c[P_ACC_TPS], row, sp->acc_tps, sp->acc_tps_ok);
    put_f64(&c[P_DRF_TPS], row, sp->drf_tps, sp->drf_tps_ok);
    put_i64(&c[P_ACC], row, sp->accepted, 1);
    put_i64(&c[P_DRF], row, sp->drafted, 1);
    put_f64(&c[P_RATE], row, sp->rate, sp->rate_ok);
    /* the rates but nan, as the line parser keeps them: appended to one column */
    int64_t kept = 0;
    for (const char *q = sp->pp; !r && q < sp->pp_end; q += 2) {
        double v;
        int ok;
        read_num(&q, sp->pp_end, &v, &ok, 0);
        if (!ok) continue;
        kept++;
        char one = 1;
        r |= buf_put(&pp->data, &v, sizeof v) | buf_put(&pp->valid, &one, 1);
    }
    put_i64(&c[P_PP_N], row, kept, 1);
    return r ? -1 : 0;
}

/* A plain line as a stats (1) or spec (2) line the lane reads, or 0 */
static int read_record(const char *s, const char *e, prefix_t *px, stats_t *st, spec_t *sp) {
    if (!read_prefix(s, e, px)) return 0;
    const char *q = px->msg, *me = e;
    while (me > q && me[-1] == ' ') me--; /* the message, rstripped */
    int kind;
    if (me - q > 23 && (q[0] == 'E' || q[0] == 'A') && read_stats(q, me, st)) kind = 1;
    else if (me - q > 21 && q[0] == 'S' && read_spec(q, me, sp)) kind = 2;
    else return 0;
    return has_lost_colour(s, e) ? 0 : kind;
}

static PyObject *scan_access(PyObject *self, PyObject *arg) {
    (void)self;
    Py_buffer view;
    if (PyObject_GetBuffer(arg, &view, PyBUF_SIMPLE)) return NULL;
    const char *data = view.buf, *end = data + view.len, *s = data;
    size_t rows;
    Py_BEGIN_ALLOW_THREADS
    rows = block_rows(data, end);
    Py_END_ALLOW_THREADS
    col_t ac[NA], sc[NS], pc[NP], pp, slow_idx;
    buf_t slow;
    memset(ac, 0, sizeof ac);
    memset(sc, 0, sizeof sc);
    memset(pc, 0, sizeof pc);
    memset(&pp, 0, sizeof pp);
    memset(&slow_idx, 0, sizeof slow_idx);
    memset(&slow, 0, sizeof slow);
    pp.name = PP_NAMES[0];
    pp.type = C_F64; /* (grown as needed: a line holds several) */
    int ok = 1;
    for (int k = 0; ok && k < NA; k++) ok = !col_init(&ac[k], A_NAMES[k], A_TYPES[k], rows);
    /* (a stats or spec line every few seconds: their tables grow as they fill) */
    for (int k = 0; ok && k < NS; k++) ok = !col_init_small(&sc[k], S_NAMES[k], S_TYPES[k], 64);
    for (int k = 0; ok && k < NP; k++) ok = !col_init_small(&pc[k], P_NAMES[k], P_TYPES[k], 64);
    if (ok) ok = !col_init(&slow_idx, "idx", C_I64, rows);
    int failed = !ok;
    int64_t idx = 0;
    size_t na = 0, ns = 0, np = 0;
    Py_BEGIN_ALLOW_THREADS
    while (!failed && s < end) {
        if (na >= rows) { failed = 1; break; } /* one row per line at most */
        int plain;
        const char *e = line_end(s, end, &plain);
        access_t a;
        prefix_t px;
        stats_t st;
        spec_t sp;
        int kind;
        if (plain && parse_access(s, e, &a) && !is_profiler(&a)) {
            if (emit(ac, na++, idx, data, s, e, &a)) failed = 1;
        } else if (plain && (kind = read_record(s, e, &px, &st, &sp)) != 0) {
            if (kind == 1 ? cols_room(sc, NS, ns) || emit_stats(sc, ns++, idx, data, s, e, &px, &st)
                          : cols_room(pc, NP, np)
                                || emit_spec(pc, &pp, np++, idx, data, s, e, &px, &sp))
                failed = 1;
        } else if (append_i64(&slow_idx, idx) || buf_put(&slow, s, (size_t)(e - s))
                   || buf_byte(&slow, '\n')) {
            failed = 1;
        }
        idx++;
        s = e < end ? e + 1 : end;
    }
    col_rows(ac, NA, na);
    col_rows(sc, NS, ns);
    col_rows(pc, NP, np);
    Py_END_ALLOW_THREADS
    PyObject *out = NULL;
    if (!failed) {
        PyObject *ad = cols_to_dict(ac, A_NAMES, NA);
        PyObject *sd = ad ? cols_to_dict(sc, S_NAMES, NS) : NULL;
        PyObject *pd = sd ? cols_to_dict(pc, P_NAMES, NP) : NULL;
        PyObject *vd = pd ? cols_to_dict(&pp, PP_NAMES, 1) : NULL;
        if (vd)
            out = Py_BuildValue("{s:N,s:N,s:N,s:N,s:y#,s:N,s:L}", "access", ad, "stats", sd,
                                "spec", pd, "per_position", vd, "slow", slow.p ? slow.p : "",
                                (Py_ssize_t)slow.n, "slow_idx", buf_take(&slow_idx.data),
                                "lines", (long long)idx);
        else {
            Py_XDECREF(ad);
            Py_XDECREF(sd);
            Py_XDECREF(pd);
        }
    } else if (!PyErr_Occurred()) {
        PyErr_NoMemory();
    }
    for (int k = 0; k < NA; k++) col_free(&ac[k]);
    for (int k = 0; k < NS; k++) col_free(&sc[k]);
    for (int k = 0; k < NP; k++) col_free(&pc[k]);
    col_free(&pp);
    col_free(&slow_idx);
    free(slow.p);
    PyBuffer_Release(&view);
    return out;
}

static PyMethodDef methods[] = {
    COUNT_LINES_METHOD,
    {"scan_access", scan_access, METH_O,
     "scan_access(data) -> dict: the plain uvicorn access lines, default stats lines and "
     "SpecDecoding lines of a block of complete lines as columns, and the text of every "
     "other line for the line parser."},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_fastlane",
                                    "One-pass C reader of the access, stats and SpecDecoding lines of a vLLM log.",
                                    -1, methods, NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__fastlane(void) {
    PyObject *m = PyModule_Create(&module);
    if (!m) return NULL;
    static const char *const tables[] = {"ACCESS_COLUMNS", "STATS_COLUMNS", "SPEC_COLUMNS"};
    const char *const *names[] = {A_NAMES, S_NAMES, P_NAMES};
    const int *types[] = {A_TYPES, S_TYPES, P_TYPES};
    const int counts[] = {NA, NS, NP};
    for (int t = 0; t < 3; t++) {
        PyObject *cols = column_table(names[t], types[t], counts[t]);
        if (!cols || PyModule_AddObject(m, tables[t], cols) < 0) {
            Py_XDECREF(cols);
            Py_DECREF(m);
            return NULL;
        }
    }
    return m;
}
