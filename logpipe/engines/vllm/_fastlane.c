/* The fast lane of the vLLM log parser: one pass in C over a block of complete lines.
 *
 * A busy vLLM server's log is mostly uvicorn's access lines, one a request, with a stats
 * line every few seconds.  scan_access(data) reads the plain access lines of a block --
 * exactly the lines logparser.PLAIN_ACCESS matches (alone on their line or behind
 * ``docker logs --timestamps``, no colour, no bracket, a status text of words), less the
 * profiler's two POSTs, which are also events -- into columns, and returns every other
 * line as text for the line parser (logpipe/engines/vllm/parser.py).  A line with a
 * control character (a carriage return included) or a byte outside ASCII is left to the
 * line parser too.  The rows are those logparser.plain_access gives for the same lines
 * (tests/test_vllm_fastlane.py compares both lanes on every sample and on edge lines).
 *
 * scan_access(data) -> {"access": {column: (values, validity, offsets)}, "slow": bytes,
 * "slow_idx": bytes (int64 line indexes), "lines": int}
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

static PyObject *scan_access(PyObject *self, PyObject *arg) {
    (void)self;
    Py_buffer view;
    if (PyObject_GetBuffer(arg, &view, PyBUF_SIMPLE)) return NULL;
    const char *data = view.buf, *end = data + view.len, *s = data;
    size_t rows;
    Py_BEGIN_ALLOW_THREADS
    rows = block_rows(data, end);
    Py_END_ALLOW_THREADS
    col_t ac[NA], slow_idx;
    buf_t slow;
    memset(ac, 0, sizeof ac);
    memset(&slow_idx, 0, sizeof slow_idx);
    memset(&slow, 0, sizeof slow);
    int ok = 1;
    for (int k = 0; ok && k < NA; k++) ok = !col_init(&ac[k], A_NAMES[k], A_TYPES[k], rows);
    if (ok) ok = !col_init(&slow_idx, "idx", C_I64, rows);
    int failed = !ok;
    int64_t idx = 0;
    size_t na = 0;
    Py_BEGIN_ALLOW_THREADS
    while (!failed && s < end) {
        if (na >= rows) { failed = 1; break; } /* one row per line at most */
        int plain;
        const char *e = line_end(s, end, &plain);
        access_t a;
        if (plain && parse_access(s, e, &a) && !is_profiler(&a)) {
            if (emit(ac, na++, idx, data, s, e, &a)) failed = 1;
        } else if (append_i64(&slow_idx, idx) || buf_put(&slow, s, (size_t)(e - s))
                   || buf_byte(&slow, '\n')) {
            failed = 1;
        }
        idx++;
        s = e < end ? e + 1 : end;
    }
    col_rows(ac, NA, na);
    Py_END_ALLOW_THREADS
    PyObject *out = NULL;
    if (!failed) {
        PyObject *ad = cols_to_dict(ac, A_NAMES, NA);
        if (ad)
            out = Py_BuildValue("{s:N,s:y#,s:N,s:L}", "access", ad, "slow",
                                slow.p ? slow.p : "", (Py_ssize_t)slow.n, "slow_idx",
                                buf_take(&slow_idx.data), "lines", (long long)idx);
    } else if (!PyErr_Occurred()) {
        PyErr_NoMemory();
    }
    for (int k = 0; k < NA; k++) col_free(&ac[k]);
    col_free(&slow_idx);
    free(slow.p);
    PyBuffer_Release(&view);
    return out;
}

static PyMethodDef methods[] = {
    COUNT_LINES_METHOD,
    {"scan_access", scan_access, METH_O,
     "scan_access(data) -> dict: the plain uvicorn access lines of a block of complete "
     "lines as columns, and the text of every other line for the line parser."},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_fastlane",
                                    "One-pass C reader of the access lines of a vLLM log.",
                                    -1, methods, NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__fastlane(void) {
    PyObject *m = PyModule_Create(&module);
    if (!m) return NULL;
    PyObject *cols = column_table(A_NAMES, A_TYPES, NA);
    if (!cols || PyModule_AddObject(m, "ACCESS_COLUMNS", cols) < 0) {
        Py_XDECREF(cols);
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
