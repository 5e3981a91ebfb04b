/* The steady-state rules over a pass's lines, in C: what logpipe/classify.py's numpy
 * kernel (_classify_numpy) computes, row for row, in two walks of each partition instead of
 * some forty whole-array steps (0.09 s of numpy a run of 320,000 lines, ~0.01 s here).
 *
 * classify(part, line, us, no_ts, running, no_running, graph, no_graph, kind, run,
 *          ready, has_ready, spans, reason_out, past_warmup_out, ts_step_out)
 *
 * Every argument is a buffer (numpy arrays from classify.py) of n rows, in the rows' own
 * order, but the run facts (ready, has_ready: one a run; spans: run, begin, end triples)
 * and the partitions' count:
 *   part      int64  the window's partition (run, rank) of a row, 0 .. parts-1
 *   line      int64  line_no (null as 0)       us     int64  epoch_us(ts) (null as 0)
 *   no_ts     bool   ts is null                running int64 running_req (null as 0)
 *   no_running bool  running_req is null       graph  bool   cuda_graph (null as false)
 *   no_graph  bool   cuda_graph is null        kind   int8   1 decode, 2 window, 3 prefill
 *   run       int32  the run's code (index into ready, has_ready)
 * Written, in the rows' own order: reason (int8: the first rule that holds, -1 none),
 * past_warmup (bool) and ts_step (float64, NaN where the row has no earlier stamp).
 *
 * The window's order is the partition, then line_no, then ts with nulls last, then the
 * row's position (a stable sort, as numpy's lexsort): rows arrive in line order, so a
 * counting sort by partition is the usual whole cost, and a partition out of order is
 * sorted alone.  The reasons are tested in run_batch_states_in's order (schemas/views.sql);
 * the gap median interpolates as DuckDB's median of doubles: lo + (hi - lo) * 0.5.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

enum { DECODE = 1, WINDOW = 2, PREFILL = 3 };

/* Whether row x comes after row y in a partition's order (line, then ts key). */
static inline int after(const int64_t *line, const int64_t *key, int64_t x, int64_t y) {
    return line[x] > line[y] || (line[x] == line[y] && key[x] > key[y]);
}

/* Sort order[0..n) (rows of one partition, in increasing position) by (line, ts key,
 * position): a natural merge sort, stable, of the ascending runs the rows arrive in (a
 * few: DuckDB's scans hand over a run's lines in long ordered stretches).  tmp: n rows,
 * bounds: n + 1 run starts.  Returns the sorted array, order or tmp. */
static int64_t *merge_runs(int64_t *order, int64_t *tmp, int64_t *bounds, int64_t n,
                           const int64_t *line, const int64_t *key) {
    int64_t runs = 0;
    bounds[runs++] = 0;
    for (int64_t j = 1; j < n; j++)
        if (after(line, key, order[j - 1], order[j])) bounds[runs++] = j;
    bounds[runs] = n;
    int64_t *from = order, *to = tmp;
    while (runs > 1) {
        int64_t merged = 0;
        for (int64_t r = 0; r < runs; r += 2) {
            int64_t lo = bounds[r], mid = bounds[r + 1 < runs ? r + 1 : runs];
            int64_t hi = bounds[r + 2 < runs ? r + 2 : runs], i = lo, j = mid, k = lo;
            while (i < mid && j < hi)  /* (a tie: the left run's, the earlier position) */
                to[k++] = after(line, key, from[i], from[j]) ? from[j++] : from[i++];
            while (i < mid) to[k++] = from[i++];
            while (j < hi) to[k++] = from[j++];
            bounds[merged++] = lo;
        }
        bounds[merged] = n;
        runs = merged;
        int64_t *swap = from;
        from = to;
        to = swap;
    }
    return from;
}

/* The k-th smallest of v[0..n) (v reordered), by quickselect. */
static double kth(double *v, int64_t n, int64_t k) {
    int64_t lo = 0, hi = n - 1;
    while (lo < hi) {
        double a = v[lo], b = v[lo + (hi - lo) / 2], c = v[hi];
        double pivot = a < b ? (b < c ? b : (a < c ? c : a)) : (a < c ? a : (b < c ? c : b));
        int64_t i = lo, j = hi;
        while (i <= j) {
            while (v[i] < pivot) i++;
            while (v[j] > pivot) j--;
            if (i <= j) {
                double t = v[i];
                v[i++] = v[j];
                v[j--] = t;
            }
        }
        if (k <= j)
            hi = j;
        else if (k >= i)
            lo = i;
        else
            return v[k];
    }
    return v[k];
}

typedef struct {
    Py_buffer b;
    int held;
} arg_t;

static int take(PyObject *obj, arg_t *a, Py_ssize_t itemsize, Py_ssize_t n, int writable,
                const char *name) {
    if (PyObject_GetBuffer(obj, &a->b, PyBUF_C_CONTIGUOUS | (writable ? PyBUF_WRITABLE : 0)))
        return -1;
    a->held = 1;
    if (n >= 0 && a->b.len != n * itemsize) {
        PyErr_Format(PyExc_ValueError, "%s: %zd bytes, expected %zd", name, a->b.len,
                     n * itemsize);
        return -1;
    }
    if (a->b.len % itemsize) {
        PyErr_Format(PyExc_ValueError, "%s: not %zd-byte items", name, itemsize);
        return -1;
    }
    return 0;
}

#define NARGS 16

static PyObject *classify(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *o[NARGS];
    Py_ssize_t parts;
    if (!PyArg_ParseTuple(args, "nOOOOOOOOOOOOOOOO", &parts, &o[0], &o[1], &o[2], &o[3],
                          &o[4], &o[5], &o[6], &o[7], &o[8], &o[9], &o[10], &o[11], &o[12],
                          &o[13], &o[14], &o[15]))
        return NULL;
    arg_t a[NARGS];
    memset(a, 0, sizeof a);
    PyObject *result = NULL;
    int64_t *order = NULL, *starts = NULL, *cursor = NULL, *key = NULL, *first_graph = NULL;
    int64_t *span_at = NULL, *span_of = NULL, *span_fill = NULL, *sorting = NULL;
    double *gap = NULL, *gaps = NULL;
    uint8_t *runs_graphs = NULL;

    if (take(o[0], &a[0], 8, -1, 0, "part")) goto done;
    Py_ssize_t n = a[0].b.len / 8;
    static const char *names[] = {"part", "line", "us", "no_ts", "running", "no_running",
                                  "graph", "no_graph", "kind", "run"};
    static const Py_ssize_t sizes[] = {8, 8, 8, 1, 8, 1, 1, 1, 1, 4};
    for (int k = 1; k < 10; k++)
        if (take(o[k], &a[k], sizes[k], n, 0, names[k])) goto done;
    if (take(o[10], &a[10], 8, -1, 0, "ready")) goto done;
    Py_ssize_t runs = a[10].b.len / 8;
    if (take(o[11], &a[11], 1, runs, 0, "has_ready")) goto done;
    if (take(o[12], &a[12], 8, -1, 0, "spans")) goto done;
    if (a[12].b.len % 24) {
        PyErr_SetString(PyExc_ValueError, "spans: not (run, begin, end) triples");
        goto done;
    }
    Py_ssize_t nspans = a[12].b.len / 24;
    if (take(o[13], &a[13], 1, n, 1, "reason") || take(o[14], &a[14], 1, n, 1, "past_warmup")
        || take(o[15], &a[15], 8, n, 1, "ts_step"))
        goto done;

    const int64_t *part = a[0].b.buf, *line = a[1].b.buf, *us = a[2].b.buf;
    const uint8_t *no_ts = a[3].b.buf;
    const int64_t *running = a[4].b.buf;
    const uint8_t *no_running = a[5].b.buf, *graph = a[6].b.buf, *no_graph = a[7].b.buf;
    const int8_t *kind = a[8].b.buf;
    const int32_t *run = a[9].b.buf;
    const int64_t *ready = a[10].b.buf;
    const uint8_t *has_ready = a[11].b.buf;
    const int64_t *spans = a[12].b.buf;
    int8_t *reason = a[13].b.buf;
    uint8_t *past = a[14].b.buf;
    double *step = a[15].b.buf;

    for (Py_ssize_t i = 0; i < n; i++)
        if (part[i] < 0 || part[i] >= parts || run[i] < 0 || run[i] >= runs) {
            PyErr_SetString(PyExc_ValueError, "a row's partition or run out of range");
            goto done;
        }
    for (Py_ssize_t s = 0; s < nspans; s++)
        if (spans[3 * s] < 0 || spans[3 * s] >= runs) {
            PyErr_SetString(PyExc_ValueError, "a span's run out of range");
            goto done;
        }

    size_t nn = (size_t)(n ? n : 1), np = (size_t)parts + 1, nr = (size_t)(runs ? runs : 1);
    order = malloc(nn * sizeof *order);
    starts = calloc(np + 1, sizeof *starts);
    cursor = malloc(np * sizeof *cursor);
    key = malloc(nn * sizeof *key);
    gap = malloc(nn * sizeof *gap);
    gaps = malloc(nn * sizeof *gaps);
    first_graph = malloc(nr * sizeof *first_graph);
    runs_graphs = calloc(nr, 1);
    span_at = calloc(nr + 1, sizeof *span_at);
    span_of = malloc((size_t)(nspans ? nspans : 1) * sizeof *span_of);
    span_fill = malloc(nr * sizeof *span_fill);
    sorting = malloc((2 * nn + 1) * sizeof *sorting);
    if (!order || !starts || !cursor || !key || !gap || !gaps || !first_graph || !runs_graphs
        || !span_at || !span_of || !span_fill || !sorting) {
        PyErr_NoMemory();
        goto done;
    }

    Py_BEGIN_ALLOW_THREADS

    /* the runs' facts: whether a decode line ran on a graph, the first such line */
    for (Py_ssize_t r = 0; r < runs; r++) first_graph[r] = INT64_MAX;
    for (Py_ssize_t i = 0; i < n; i++) {
        key[i] = no_ts[i] ? INT64_MAX : us[i];
        if (kind[i] == DECODE && !no_graph[i] && graph[i]) {
            runs_graphs[run[i]] = 1;
            if (line[i] < first_graph[run[i]]) first_graph[run[i]] = line[i];
        }
    }
    /* the profiled spans by run */
    for (Py_ssize_t s = 0; s < nspans; s++) span_at[spans[3 * s] + 1]++;
    for (Py_ssize_t r = 0; r < runs; r++) span_at[r + 1] += span_at[r];
    for (Py_ssize_t r = 0; r < runs; r++) span_fill[r] = span_at[r];
    for (Py_ssize_t s = 0; s < nspans; s++) span_of[span_fill[spans[3 * s]]++] = s;

    /* a stable counting sort by partition, then each partition out of order sorted alone */
    for (Py_ssize_t i = 0; i < n; i++) starts[part[i] + 1]++;
    for (Py_ssize_t p = 0; p < parts; p++) starts[p + 1] += starts[p];
    for (Py_ssize_t p = 0; p < parts; p++) cursor[p] = starts[p];
    for (Py_ssize_t i = 0; i < n; i++) order[cursor[part[i]]++] = i;
    for (Py_ssize_t p = 0; p < parts; p++) {
        int64_t s = starts[p], e = starts[p + 1];
        int64_t *sorted = merge_runs(order + s, sorting, sorting + (e - s), e - s, line, key);
        if (sorted != order + s) memcpy(order + s, sorted, (size_t)(e - s) * sizeof *order);
    }

    for (Py_ssize_t p = 0; p < parts; p++) {
        int64_t s = starts[p], e = starts[p + 1];
        if (s == e) continue;
        /* first walk: the gaps between decode lines, the steps between stamps, whether
         * a decode line came before; the gap median */
        int64_t last_decode = -1, last_decode_ts = -1, last_ts = -1, ngaps = 0;
        for (int64_t j = s; j < e; j++) {
            int64_t i = order[j];
            int is_decode = kind[i] == DECODE || kind[i] == WINDOW;
            double seconds = (double)us[i] / 1e6;
            gap[j] = NAN;
            if (is_decode && last_decode_ts >= 0 && !no_ts[i]) {
                gap[j] = seconds - (double)us[last_decode_ts] / 1e6;
                gaps[ngaps++] = gap[j];
            }
            step[i] = (last_ts >= 0 && !no_ts[i]) ? seconds - (double)us[last_ts] / 1e6 : NAN;
            /* reason 4/5 need "no decode line before": kept in reason[] until the second
             * walk (-2: a decode line came before) */
            reason[i] = last_decode >= 0 ? -2 : -1;
            if (is_decode) last_decode = i;
            if (is_decode && !no_ts[i]) last_decode_ts = i;
            if (!no_ts[i]) last_ts = i;
        }
        double limit = NAN;
        if (ngaps) {  /* (gaps are differences of stamps: never NaN, never -0.0) */
            int64_t lo = (ngaps - 1) / 2, hi = ngaps / 2;
            double low = kth(gaps, ngaps, lo), high = low;
            for (int64_t g = lo + 1; hi > lo && g < ngaps; g++)  /* (the next: the least above) */
                if (g == lo + 1 || gaps[g] < high) high = gaps[g];
            limit = low + (high - low) * (lo == hi ? 0.0 : 0.5);
        }
        /* second walk: the reasons, first that holds wins */
        for (int64_t j = s; j < e; j++) {
            int64_t i = order[j];
            int32_t r = run[i];
            int k = kind[i];
            int is_decode = k == DECODE || k == WINDOW;
            int decode_before = reason[i] == -2;
            int8_t why = -1;
            int prev_idle = 0, prev_prefill = 0;
            if (j > s) {
                int64_t q = order[j - 1];
                prev_idle = !no_running[q] && running[q] == 0;
                prev_prefill = kind[q] == PREFILL;
            }
            if (has_ready[r] && line[i] < ready[r]) {
                why = 0;
            } else {
                int profiled = 0;
                for (int64_t t = span_at[r]; t < span_at[r + 1] && !profiled; t++) {
                    const int64_t *sp = spans + 3 * span_of[t];
                    profiled = line[i] > sp[1] && line[i] < sp[2];
                }
                if (profiled)
                    why = 1;
                else if (is_decode && !no_running[i] && running[i] == 0)
                    why = 2;
                else if (k == DECODE && !no_graph[i] && !graph[i] && runs_graphs[r])
                    why = 3;
                else if (k == DECODE && !decode_before)
                    why = 4;
                else if (k == WINDOW && !decode_before)
                    why = 5;
                else if (k == DECODE && prev_idle && prev_prefill)
                    why = 6;
                else if (k == WINDOW && prev_idle)
                    why = 7;
                else if (k == WINDOW
                         && (j == e - 1 || no_running[order[j + 1]]
                             || running[order[j + 1]] == 0))
                    why = 8;
                else if (is_decode && limit > 0 && gap[j] > 3 * limit)
                    why = 9;
            }
            reason[i] = why;
            int64_t from = first_graph[r] == INT64_MAX ? 0 : first_graph[r];
            past[i] = is_decode && (no_running[i] || running[i] > 0)
                      && (!has_ready[r] || line[i] >= ready[r]) && line[i] >= from;
        }
    }

    Py_END_ALLOW_THREADS

    result = Py_NewRef(Py_None);
done:
    for (int k = 0; k < NARGS; k++)
        if (a[k].held) PyBuffer_Release(&a[k].b);
    free(order);
    free(starts);
    free(cursor);
    free(key);
    free(gap);
    free(gaps);
    free(first_graph);
    free(runs_graphs);
    free(span_at);
    free(span_of);
    free(span_fill);
    free(sorting);
    return result;
}

static PyMethodDef methods[] = {
    {"classify", classify, METH_VARARGS,
     "classify(parts, part, line, us, no_ts, running, no_running, graph, no_graph, kind, "
     "run, ready, has_ready, spans, reason, past_warmup, ts_step): the steady-state rules "
     "over a pass's lines, written into the last three buffers"},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_classify",
                                    "The steady-state rules over a pass's lines, in C.", -1,
                                    methods, NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__classify(void) { return PyModule_Create(&module); }
