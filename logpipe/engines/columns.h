/* Columns built in C and handed to Python without a copy: the helpers the engines' fast
 * lanes share (logpipe/engines/sglang/_fastlane.c, logpipe/engines/vllm/_fastlane.c).
 *
 * A table is an array of col_t, each with room for one row per line of the block; a scan
 * writes row by row, then col_rows sets the lengths and cols_to_dict hands each column's
 * buffers to Python as (values, validity, offsets) bytes, which the Python side wraps as
 * Arrow arrays.  Every function is static inline: a lane includes what it uses.
 */
#ifndef LOGPIPE_COLUMNS_H
#define LOGPIPE_COLUMNS_H
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#ifdef __SSE2__
#include <emmintrin.h>
#endif

/* ---------------------------------------------------------------- growable buffers */

typedef struct {
    char *p;
    size_t n, cap;
    PyObject *obj; /* set: p is the storage of this bytes object, of fixed capacity */
} buf_t;

static inline int buf_reserve(buf_t *b, size_t extra) {
    if (b->n + extra <= b->cap) return 0;
    if (b->obj) return -1; /* sized for every line of the block: cannot happen */
    size_t cap = b->cap ? b->cap : 4096;
    while (cap < b->n + extra) cap *= 2;
    char *p = realloc(b->p, cap);
    if (!p) return -1;
    b->p = p;
    b->cap = cap;
    return 0;
}

static inline int buf_put(buf_t *b, const void *src, size_t n) {
    if (n == 0) return 0; /* memcpy with a NULL pointer is undefined even for 0 bytes */
    if (buf_reserve(b, n)) return -1;
    memcpy(b->p + b->n, src, n);
    b->n += n;
    return 0;
}

static inline int buf_byte(buf_t *b, char c) { return buf_put(b, &c, 1); }

/* Storage of exactly cap bytes in a bytes object (GIL held): the column is handed to
 * Python without a copy, and never reallocated while it fills. */
static inline int buf_fixed(buf_t *b, size_t cap) {
    b->obj = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)(cap ? cap : 1));
    if (!b->obj) return -1;
    b->p = PyBytes_AS_STRING(b->obj);
    b->n = 0;
    b->cap = cap;
    return 0;
}

/* The buffer as a new bytes object (GIL held); a fixed buffer is shrunk, not copied. */
static inline PyObject *buf_take(buf_t *b) {
    if (!b->obj) return PyBytes_FromStringAndSize(b->p ? b->p : "", (Py_ssize_t)b->n);
    PyObject *o = b->obj;
    b->obj = NULL;
    b->p = NULL;
    if (_PyBytes_Resize(&o, (Py_ssize_t)b->n)) return NULL;
    return o;
}

static inline void buf_free(buf_t *b) { /* GIL held */
    if (b->obj) Py_DECREF(b->obj);
    else free(b->p);
    b->obj = NULL;
    b->p = NULL;
}

/* ---------------------------------------------------------------- columns */

enum { C_I64, C_I32, C_F64, C_U8, C_STR };

typedef struct {
    const char *name;
    int type;
    buf_t data;  /* values, or string bytes */
    buf_t valid; /* one byte per row: 1 = value, 0 = null */
    buf_t offs;  /* C_STR: int64 offsets, rows + 1 */
} col_t;

static const size_t WIDTH[] = {8, 4, 8, 1, 0}; /* bytes per value of each type */

/* A column with room for ``rows`` values, made by ``room`` (buf_fixed or buf_reserve) */
static inline int col_make(col_t *c, const char *name, int type, size_t rows,
                           int (*room)(buf_t *, size_t)) {
    memset(c, 0, sizeof *c);
    c->name = name;
    c->type = type;
    if (room(&c->valid, rows)) return -1;
    if (type == C_STR) {
        int64_t zero = 0;
        if (room(&c->offs, (rows + 1) * sizeof zero)) return -1;
        return buf_put(&c->offs, &zero, sizeof zero);
    }
    return room(&c->data, rows * WIDTH[type]);
}

/* A column with room for ``rows`` values (GIL held); string bytes grow as needed. */
static inline int col_init(col_t *c, const char *name, int type, size_t rows) {
    return col_make(c, name, type, rows, buf_fixed);
}

/* A column of a table with few rows beside the block's lines (a vLLM log's stats lines):
 * malloc'd room for ``rows`` values, grown by cols_room as the table fills, and copied when
 * handed to Python (a table sized for every line of the block, as col_init's, is ~9 MB of
 * a busy 8 MB block that a few hundred rows do not need). */
static inline int col_init_small(col_t *c, const char *name, int type, size_t rows) {
    return col_make(c, name, type, rows, buf_reserve);
}

/* Room for row ``row`` in each of the n columns of a table of col_init_small (values and
 * validity are written by index, their lengths set by col_rows: only offsets' first value
 * is counted while it fills) */
static inline int cols_room(col_t *c, int n, size_t row) {
    for (int k = 0; k < n; k++) {
        size_t need = row + 1;
        if (c[k].valid.cap < need && buf_reserve(&c[k].valid, need)) return -1;
        if (c[k].type == C_STR) {
            size_t bytes = (need + 1) * sizeof(int64_t);
            if (c[k].offs.cap < bytes && buf_reserve(&c[k].offs, bytes - c[k].offs.n))
                return -1;
        } else if (c[k].data.cap < need * WIDTH[c[k].type]
                   && buf_reserve(&c[k].data, need * WIDTH[c[k].type])) {
            return -1;
        }
    }
    return 0;
}

static inline void col_free(col_t *c) {
    buf_free(&c->data);
    buf_free(&c->valid);
    buf_free(&c->offs);
}

/* The value of row ``row`` of a column (the hot path of the scan).  col_init made room
 * for one row per line of the block, and the scan checks its row counts against that, so
 * these write by index: no length to load and store per value.  col_rows sets the
 * lengths once the table is complete.  Values and validity are stored as their own types
 * (validity as _Bool, which holds 0 or 1 in one byte): a store through a char pointer may
 * alias anything, and made the compiler load every column's pointers again after each
 * value of a row.  The buffers are malloc'd or bytes objects' storage, aligned for each. */
_Static_assert(sizeof(_Bool) == 1, "validity is one byte per row");
static inline void put_valid(col_t *c, size_t row, int ok) {
    ((_Bool *)(void *)c->valid.p)[row] = ok != 0;
}
static inline int put_i64(col_t *c, size_t row, int64_t v, int ok) {
    ((int64_t *)(void *)c->data.p)[row] = v;
    put_valid(c, row, ok);
    return 0;
}
static inline int put_i32(col_t *c, size_t row, int32_t v, int ok) {
    ((int32_t *)(void *)c->data.p)[row] = v;
    put_valid(c, row, ok);
    return 0;
}
static inline int put_f64(col_t *c, size_t row, double v, int ok) {
    ((double *)(void *)c->data.p)[row] = v;
    put_valid(c, row, ok);
    return 0;
}
static inline int put_u8(col_t *c, size_t row, uint8_t v, int ok) {
    c->data.p[row] = (char)v;
    put_valid(c, row, ok);
    return 0;
}

/* A value appended to a column outside a table (the slow lines' numbers) */
static inline int append_i64(col_t *c, int64_t v) {
    if (c->valid.n >= c->valid.cap) return -1;
    put_i64(c, c->valid.n, v, 1);
    c->data.n += 8;
    c->valid.n++;
    return 0;
}

static inline void col_rows(col_t *c, int n, size_t rows) {
    for (int k = 0; k < n; k++) {
        c[k].valid.n = rows;
        if (c[k].type == C_STR) c[k].offs.n = (rows + 1) * sizeof(int64_t);
        else c[k].data.n = rows * WIDTH[c[k].type];
    }
}

static inline int put_str(col_t *c, size_t row, const char *s, size_t n, int ok) {
    if (ok && buf_put(&c->data, s, n)) return -1; /* string bytes grow as needed */
    ((int64_t *)(void *)c->offs.p)[row + 1] = (int64_t)c->data.n;
    put_valid(c, row, ok);
    return 0;
}

static inline int is_digit(char c) { return c >= '0' && c <= '9'; }
static inline int is_alpha(char c) { return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z'); }


static inline PyObject *cols_to_dict(col_t *c, const char **names, int n) {
    PyObject *d = PyDict_New();
    if (!d) return NULL;
    for (int k = 0; k < n; k++) {
        PyObject *data = buf_take(&c[k].data), *valid = buf_take(&c[k].valid);
        PyObject *offs = c[k].type == C_STR ? buf_take(&c[k].offs) : Py_NewRef(Py_None);
        PyObject *t = data && valid && offs ? PyTuple_Pack(3, data, valid, offs) : NULL;
        Py_XDECREF(data);
        Py_XDECREF(valid);
        Py_XDECREF(offs);
        if (!t || PyDict_SetItemString(d, names[k], t)) {
            Py_XDECREF(t);
            Py_DECREF(d);
            return NULL;
        }
        Py_DECREF(t);
    }
    return d;
}

/* The end of the line at s (its '\n', or end) and, in *plain, whether the line is plain:
 * no control character and no non-ASCII text.  One pass that stops at the first control
 * or non-ASCII byte, sixteen bytes at a time where SSE2 is there (a plain line's first
 * such byte is its '\n'; a search for '\n' and then a check of the line read it twice). */
static inline const char *line_end(const char *s, const char *end, int *plain) {
    const char *q = s;
#ifdef __SSE2__
    const __m128i space = _mm_set1_epi8(0x20), del = _mm_set1_epi8(0x7f);
    for (; end - q >= 16; q += 16) {
        __m128i v = _mm_loadu_si128((const __m128i *)(const void *)q);
        /* signed: bytes >= 0x80 are negative, so below 0x20 too */
        int m = _mm_movemask_epi8(_mm_or_si128(_mm_cmplt_epi8(v, space),
                                               _mm_cmpeq_epi8(v, del)));
        if (m) {
            q += __builtin_ctz((unsigned)m);
            break;
        }
    }
#endif
    for (; q < end; q++) {
        unsigned char c = (unsigned char)*q;
        if (c < 0x20 || c >= 0x7f) break;
    }
    if (q < end && *q == '\n') {
        *plain = 1;
        return q;
    }
    *plain = q == end;
    const char *nl = q < end ? memchr(q, '\n', (size_t)(end - q)) : NULL;
    return nl ? nl : end;
}

static const char *const TYPE_CODES[] = {"i64", "i32", "f64", "u8", "str"};

/* ((name, type code), ...) of a table's columns */
static inline PyObject *column_table(const char *const *names, const int *types, int n) {
    PyObject *t = PyTuple_New(n);
    for (int k = 0; t && k < n; k++) {
        PyObject *item = Py_BuildValue("(ss)", names[k], TYPE_CODES[types[k]]);
        if (!item) { Py_CLEAR(t); break; }
        PyTuple_SET_ITEM(t, k, item);
    }
    return t;
}

/* The rows a table of the block may need: its lines, a last line without its newline
 * included (GIL held or not). */
static inline size_t block_rows(const char *data, const char *end) {
    size_t rows = 1;
    for (const char *q = data; q < end; rows++) {
        q = memchr(q, '\n', (size_t)(end - q));
        if (!q) break;
        q++;
    }
    return rows;
}

/* count_lines(data) -> int: the newlines in data, GIL released (bytes.count reads one
 * byte at a time: ~30 ms per 32 MB block against ~3 ms for memchr's vector loop) */
static inline PyObject *count_lines(PyObject *self, PyObject *arg) {
    (void)self;
    Py_buffer view;
    if (PyObject_GetBuffer(arg, &view, PyBUF_SIMPLE)) return NULL;
    const char *q = view.buf, *end = q + view.len;
    long long n = 0;
    Py_BEGIN_ALLOW_THREADS
    while (q < end && (q = memchr(q, '\n', (size_t)(end - q))) != NULL) {
        n++;
        q++;
    }
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&view);
    return PyLong_FromLongLong(n);
}

#define COUNT_LINES_METHOD                                                                   \
    {"count_lines", count_lines, METH_O,                                                     \
     "count_lines(data) -> int: the number of newlines in a bytes-like object."}

#endif
