/*
 * adapter.journal._native: CRC32C and journal record framing, a whole batch per call.
 *
 * Theory of operation
 * -------------------
 * The journal's per-record work in Python (two struct calls and one CRC call
 * per record, ~1.2 us) cost more than writing the bytes. Everything here
 * does that work for a batch of records in one call and produces exactly the
 * bytes of the pure-Python reference, adapter/journal/_reference.py, which
 * the tests compare byte for byte.
 *
 * Record layout (little-endian, adapter/journal/format.py):
 *
 *     0 u32 CRC32C of bytes 4 .. 36+n   4 u32 n (payload length)
 *     8 u64 msg_seq   16 u64 time_ns   24 u64 source_seq
 *    32 u16 source_stream   34 u16 flags   36 payload (n bytes)
 *
 * Decoded records are (msg_seq, time_ns, source_stream, source_seq, payload, flags).
 *
 * CRC32C (Castagnoli, reflected polynomial 0x82F63B78, initial and final
 * XOR 0xFFFFFFFF) is the `crc32c` PyPI package's: crc32c(data, value) chains
 * from a previous result. On x86_64 with SSE4.2 the CRC32 instruction takes
 * eight bytes at a time; elsewhere a slice-by-8 table does.
 *
 * The framing functions that write into a caller's buffer ("*_into") stop
 * *without error* at the first record that would pass `limit` (and, for
 * tuples, at a msg_seq that does not increase or a time at or past
 * day_end_ns) and return how far they got, so the writer handles segment
 * rolls, index entries and full buffers in Python and calls again. Bad
 * input raises TypeError or ValueError naming the parameter; bytes already
 * written past `offset` by a call that raised are not published by the
 * writer and are overwritten later.
 *
 * An Appender is a journal writer's live tail (its buffer, published end and
 * limits) as a C object, so that another extension appends to the writer with
 * no call into Python on the common path: the source pump (adapter/_pump.c)
 * gets append_run through the capsule APPEND_API (_append_api.h).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h> /* T_OBJECT_EX: the Appender's slots */

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

#include "_append_api.h" /* FhAppendApi: the C entry the source pump appends through */
#include "_native_constants.h" /* RECORD_HEADER_SIZE, MAX_PAYLOAD_BYTES, CONTROL_FLAGS, STATUS_*:
                                  generated from layout.py by scripts/gen_constants.py */

/* CRCs of at least this many bytes run without the GIL. */
#define CRC_RELEASE_GIL_BYTES (64 * 1024)

/* -- CRC32C ------------------------------------------------------------------------------------ */

static uint32_t crc_table[8][256];

static void crc_init_tables(void) {
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++) {
            c = (c >> 1) ^ (0x82F63B78u & (0u - (c & 1u)));
        }
        crc_table[0][i] = c;
    }
    for (uint32_t i = 0; i < 256; i++) {
        for (int t = 1; t < 8; t++) {
            crc_table[t][i] = (crc_table[t - 1][i] >> 8) ^ crc_table[0][crc_table[t - 1][i] & 0xFFu];
        }
    }
}

static inline uint64_t load_u64le(const uint8_t *p) {
    return (uint64_t)p[0] | (uint64_t)p[1] << 8 | (uint64_t)p[2] << 16 | (uint64_t)p[3] << 24 |
           (uint64_t)p[4] << 32 | (uint64_t)p[5] << 40 | (uint64_t)p[6] << 48 | (uint64_t)p[7] << 56;
}

/* `crc` is the running (inverted) state, not a finished CRC. */
static uint32_t crc_update_software(uint32_t crc, const uint8_t *p, size_t n) {
    while (n >= 8) {
        uint64_t word = load_u64le(p) ^ crc;
        crc = crc_table[7][word & 0xFF] ^ crc_table[6][(word >> 8) & 0xFF] ^ crc_table[5][(word >> 16) & 0xFF] ^
              crc_table[4][(word >> 24) & 0xFF] ^ crc_table[3][(word >> 32) & 0xFF] ^
              crc_table[2][(word >> 40) & 0xFF] ^ crc_table[1][(word >> 48) & 0xFF] ^ crc_table[0][word >> 56];
        p += 8;
        n -= 8;
    }
    while (n--) {
        crc = (crc >> 8) ^ crc_table[0][(crc ^ *p++) & 0xFF];
    }
    return crc;
}

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define HAVE_HARDWARE_CRC 1
__attribute__((target("sse4.2"))) static uint32_t crc_update_hardware(uint32_t crc, const uint8_t *p, size_t n) {
    uint64_t c = crc;
    while (n >= 8) {
        uint64_t word;
        memcpy(&word, p, 8); /* x86_64 is little-endian; memcpy is an unaligned load */
        c = __builtin_ia32_crc32di(c, word);
        p += 8;
        n -= 8;
    }
    uint32_t c32 = (uint32_t)c;
    while (n--) {
        c32 = __builtin_ia32_crc32qi(c32, *p++);
    }
    return c32;
}
#else
#define HAVE_HARDWARE_CRC 0
#endif

typedef uint32_t (*crc_update_fn)(uint32_t, const uint8_t *, size_t);
static crc_update_fn crc_update = crc_update_software;

static inline uint32_t crc32c_value(uint32_t value, const uint8_t *p, size_t n) {
    return ~crc_update(~value, p, n);
}

/* -- argument helpers -------------------------------------------------------------------------- */

static inline void put_u16le(uint8_t *p, uint16_t v) {
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
}

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
/* One store each (gcc -O2 keeps the byte loops below as loops: 2/3 of framing a record). */
static inline void put_u32le(uint8_t *p, uint32_t v) { memcpy(p, &v, 4); }

static inline void put_u64le(uint8_t *p, uint64_t v) { memcpy(p, &v, 8); }
#else
static inline void put_u32le(uint8_t *p, uint32_t v) {
    for (int i = 0; i < 4; i++) {
        p[i] = (uint8_t)(v >> (8 * i));
    }
}

static inline void put_u64le(uint8_t *p, uint64_t v) {
    for (int i = 0; i < 8; i++) {
        p[i] = (uint8_t)(v >> (8 * i));
    }
}
#endif

static inline uint32_t get_u32le(const uint8_t *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static inline uint16_t get_u16le(const uint8_t *p) { return (uint16_t)(p[0] | p[1] << 8); }

/* An int in 0..max into *out; TypeError for a non-int, ValueError naming `name` out of range. */
static int as_uint(PyObject *obj, const char *name, uint64_t max, uint64_t *out) {
    if (!PyLong_Check(obj)) {
        PyErr_Format(PyExc_TypeError, "%s must be an int, not %.100s", name, Py_TYPE(obj)->tp_name);
        return -1;
    }
    unsigned long long v = PyLong_AsUnsignedLongLong(obj);
    if (v == (unsigned long long)-1 && PyErr_Occurred()) {
        if (!PyErr_ExceptionMatches(PyExc_OverflowError)) {
            return -1;
        }
        PyErr_Clear();
        PyErr_Format(PyExc_ValueError, "%s out of range 0..%llu: %R", name, (unsigned long long)max, obj);
        return -1;
    }
    if (v > max) {
        PyErr_Format(PyExc_ValueError, "%s out of range 0..%llu: %R", name, (unsigned long long)max, obj);
        return -1;
    }
    *out = (uint64_t)v;
    return 0;
}

static int as_ssize(PyObject *obj, const char *name, Py_ssize_t *out) {
    if (!PyLong_Check(obj)) {
        PyErr_Format(PyExc_TypeError, "%s must be an int, not %.100s", name, Py_TYPE(obj)->tp_name);
        return -1;
    }
    Py_ssize_t v = PyLong_AsSsize_t(obj);
    if (v == -1 && PyErr_Occurred()) {
        return -1;
    }
    *out = v;
    return 0;
}

/* A msg_seq that may be "none yet" (any negative int, normally -1): *have is false then. */
static int as_optional_seq(PyObject *obj, const char *name, bool *have, uint64_t *out) {
    if (PyLong_Check(obj)) {
        int overflow = 0;
        long long v = PyLong_AsLongLongAndOverflow(obj, &overflow);
        if (v == -1 && PyErr_Occurred()) {
            return -1;
        }
        if (overflow < 0 || (overflow == 0 && v < 0)) {
            *have = false;
            *out = 0;
            return 0;
        }
    }
    *have = true;
    return as_uint(obj, name, UINT64_MAX, out);
}

/* The source_seqs of a batch: an int64/uint64 buffer (array.array('q'), numpy) or a sequence of ints. */
typedef struct {
    PyObject *fast;   /* PySequence_Fast result, or NULL with the buffer form */
    Py_buffer view;   /* valid when has_view */
    bool has_view;
    bool is_signed;
    Py_ssize_t count;
} SeqSource;

static int seqs_open(SeqSource *s, PyObject *obj) {
    memset(s, 0, sizeof(*s));
    if (PyObject_CheckBuffer(obj)) {
        if (PyObject_GetBuffer(obj, &s->view, PyBUF_FORMAT | PyBUF_C_CONTIGUOUS) < 0) {
            return -1;
        }
        s->has_view = true;
        const char *format = s->view.format == NULL ? "B" : s->view.format;
        if (*format == '@' || *format == '=' || *format == '<') {
            format++;
        }
        bool ok = s->view.itemsize == 8 && format[0] != '\0' && format[1] == '\0' && strchr("qQlLnN", format[0]);
        if (!ok) {
            PyErr_Format(PyExc_TypeError,
                         "source_seqs: a buffer must hold 64-bit ints (format 'q' or 'Q'), not format %.20s of "
                         "%zd-byte items",
                         s->view.format == NULL ? "B" : s->view.format, s->view.itemsize);
            PyBuffer_Release(&s->view);
            s->has_view = false;
            return -1;
        }
        s->is_signed = strchr("qln", format[0]) != NULL;
        s->count = s->view.len / 8;
        return 0;
    }
    s->fast = PySequence_Fast(obj, "source_seqs must be a sequence of ints or an int64 buffer");
    if (s->fast == NULL) {
        return -1;
    }
    s->count = PySequence_Fast_GET_SIZE(s->fast);
    return 0;
}

static void seqs_close(SeqSource *s) {
    if (s->has_view) {
        PyBuffer_Release(&s->view);
        s->has_view = false;
    }
    Py_CLEAR(s->fast);
}

static int seqs_get(const SeqSource *s, Py_ssize_t i, uint64_t *out) {
    if (s->has_view) {
        uint64_t v;
        memcpy(&v, (const uint8_t *)s->view.buf + 8 * i, 8);
        if (s->is_signed && (int64_t)v < 0) {
            PyErr_Format(PyExc_ValueError, "source_seqs[%zd] out of range 0..18446744073709551615: %lld", i, (long long)(int64_t)v);
            return -1;
        }
        *out = v;
        return 0;
    }
    PyObject *item = PySequence_Fast_GET_ITEM(s->fast, i);
    if (PyLong_CheckExact(item)) {
        unsigned long long v = PyLong_AsUnsignedLongLong(item);
        if (!(v == (unsigned long long)-1 && PyErr_Occurred())) {
            *out = (uint64_t)v;
            return 0;
        }
        PyErr_Clear();
    }
    char name[48];
    snprintf(name, sizeof(name), "source_seqs[%zd]", i);
    return as_uint(item, name, UINT64_MAX, out);
}

/* A payload: bytes (no copy of the object) or any C-contiguous bytes-like object. */
typedef struct {
    const uint8_t *data;
    Py_ssize_t len;
    Py_buffer view;
    bool has_view;
} Payload;

static int payload_open(Payload *p, PyObject *obj, Py_ssize_t index) {
    p->has_view = false;
    if (PyBytes_Check(obj)) {
        p->data = (const uint8_t *)PyBytes_AS_STRING(obj);
        p->len = PyBytes_GET_SIZE(obj);
    } else if (PyObject_CheckBuffer(obj) && !PyUnicode_Check(obj)) {
        if (PyObject_GetBuffer(obj, &p->view, PyBUF_C_CONTIGUOUS) < 0) {
            return -1;
        }
        p->has_view = true;
        p->data = (const uint8_t *)p->view.buf;
        p->len = p->view.len;
    } else {
        PyErr_Format(PyExc_TypeError, "payloads[%zd] must be bytes, not %.100s", index, Py_TYPE(obj)->tp_name);
        return -1;
    }
    if (p->len > MAX_PAYLOAD_BYTES) {
        PyErr_Format(PyExc_ValueError, "payloads[%zd] too large: %zd bytes > %d", index, p->len, MAX_PAYLOAD_BYTES);
        if (p->has_view) {
            PyBuffer_Release(&p->view);
            p->has_view = false;
        }
        return -1;
    }
    return 0;
}

static void payload_close(Payload *p) {
    if (p->has_view) {
        PyBuffer_Release(&p->view);
        p->has_view = false;
    }
}

/* A writable destination: a bytearray directly, otherwise a writable buffer. */
typedef struct {
    uint8_t *data;
    Py_ssize_t len;
    Py_buffer view;
    bool has_view;
} Dest;

static int dest_open(Dest *d, PyObject *obj) {
    d->has_view = false;
    if (PyByteArray_CheckExact(obj)) {
        d->data = (uint8_t *)PyByteArray_AS_STRING(obj);
        d->len = PyByteArray_GET_SIZE(obj);
        return 0;
    }
    if (!PyObject_CheckBuffer(obj) || PyObject_GetBuffer(obj, &d->view, PyBUF_WRITABLE | PyBUF_C_CONTIGUOUS) < 0) {
        if (PyErr_Occurred() && !PyErr_ExceptionMatches(PyExc_BufferError)) {
            return -1;
        }
        PyErr_Clear();
        PyErr_Format(PyExc_TypeError, "buf must be a writable contiguous buffer (a bytearray), not %.100s",
                     Py_TYPE(obj)->tp_name);
        return -1;
    }
    d->has_view = true;
    d->data = (uint8_t *)d->view.buf;
    d->len = d->view.len;
    return 0;
}

static void dest_close(Dest *d) {
    if (d->has_view) {
        PyBuffer_Release(&d->view);
        d->has_view = false;
    }
}

/* Write one record at dst (which has room for RECORD_HEADER_SIZE + len bytes). */
static inline void write_record(uint8_t *dst, uint64_t msg_seq, uint64_t time_ns, uint64_t source_seq,
                                uint16_t source_stream, uint16_t flags, const uint8_t *payload, Py_ssize_t len) {
    put_u32le(dst + 4, (uint32_t)len);
    put_u64le(dst + 8, msg_seq);
    put_u64le(dst + 16, time_ns);
    put_u64le(dst + 24, source_seq);
    put_u16le(dst + 32, source_stream);
    put_u16le(dst + 34, flags);
    if (len > 0) {
        memcpy(dst + RECORD_HEADER_SIZE, payload, (size_t)len);
    }
    put_u32le(dst, crc32c_value(0, dst + 4, (size_t)(RECORD_HEADER_SIZE - 4 + len)));
}

/* -- crc32c ------------------------------------------------------------------------------------ */

static PyObject *crc32c_impl(PyObject *args, PyObject *kwargs, crc_update_fn update) {
    static char *keywords[] = {"data", "value", NULL};
    Py_buffer data;
    PyObject *value_obj = NULL;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "y*|O:crc32c", keywords, &data, &value_obj)) {
        return NULL;
    }
    uint64_t value = 0;
    if (value_obj != NULL && as_uint(value_obj, "value", UINT32_MAX, &value) < 0) {
        PyBuffer_Release(&data);
        return NULL;
    }
    uint32_t crc;
    if (data.len >= CRC_RELEASE_GIL_BYTES) {
        Py_BEGIN_ALLOW_THREADS
        crc = ~update(~(uint32_t)value, data.buf, (size_t)data.len);
        Py_END_ALLOW_THREADS
    } else {
        crc = ~update(~(uint32_t)value, data.buf, (size_t)data.len);
    }
    PyBuffer_Release(&data);
    return PyLong_FromUnsignedLong(crc);
}

static PyObject *py_crc32c(PyObject *Py_UNUSED(self), PyObject *args, PyObject *kwargs) {
    return crc32c_impl(args, kwargs, crc_update);
}

static PyObject *py_crc32c_software(PyObject *Py_UNUSED(self), PyObject *args, PyObject *kwargs) {
    return crc32c_impl(args, kwargs, crc_update_software);
}

/* -- batches of consecutive msg_seqs ----------------------------------------------------------- */

typedef struct {
    uint64_t first_msg_seq;
    uint64_t time_ns;
    uint64_t source_stream;
    uint64_t flags;
    SeqSource seqs;
    PyObject *payloads; /* PySequence_Fast */
    Py_ssize_t count;
} Batch;

static int batch_open(Batch *b, PyObject *first, PyObject *time_ns, PyObject *stream, PyObject *seqs,
                      PyObject *payloads, PyObject *flags) {
    memset(b, 0, sizeof(*b));
    if (as_uint(first, "first_msg_seq", UINT64_MAX, &b->first_msg_seq) < 0 ||
        as_uint(time_ns, "time_ns", UINT64_MAX, &b->time_ns) < 0 ||
        as_uint(stream, "source_stream", UINT16_MAX, &b->source_stream) < 0 ||
        (flags != NULL && as_uint(flags, "flags", UINT16_MAX, &b->flags) < 0)) {
        return -1;
    }
    if (seqs_open(&b->seqs, seqs) < 0) {
        return -1;
    }
    b->payloads = PySequence_Fast(payloads, "payloads must be a sequence of bytes");
    if (b->payloads == NULL) {
        seqs_close(&b->seqs);
        return -1;
    }
    b->count = PySequence_Fast_GET_SIZE(b->payloads);
    if (b->count != b->seqs.count) {
        PyErr_Format(PyExc_ValueError, "source_seqs and payloads differ in length: %zd != %zd", b->seqs.count,
                     b->count);
        goto fail;
    }
    if (b->count > 0 && b->first_msg_seq > UINT64_MAX - (uint64_t)(b->count - 1)) {
        PyErr_Format(PyExc_ValueError, "msg_seq out of range: first_msg_seq %R + %zd records passes 2**64-1", first,
                     b->count);
        goto fail;
    }
    return 0;
fail:
    Py_CLEAR(b->payloads);
    seqs_close(&b->seqs);
    return -1;
}

static void batch_close(Batch *b) {
    Py_CLEAR(b->payloads);
    seqs_close(&b->seqs);
}

/* Frame records start..stop-1 of `b` into dst[offset:limit]; *next = first record not framed. */
static int batch_frame(Batch *b, uint8_t *dst, Py_ssize_t offset, Py_ssize_t limit, Py_ssize_t start,
                       Py_ssize_t stop, Py_ssize_t *new_offset, Py_ssize_t *next) {
    PyObject **items = PySequence_Fast_ITEMS(b->payloads);
    Py_ssize_t i = start;
    for (; i < stop; i++) {
        Payload p;
        if (payload_open(&p, items[i], i) < 0) {
            return -1;
        }
        if (p.len > limit - offset - RECORD_HEADER_SIZE) {
            payload_close(&p);
            break;
        }
        uint64_t source_seq;
        if (seqs_get(&b->seqs, i, &source_seq) < 0) {
            payload_close(&p);
            return -1;
        }
        write_record(dst + offset, b->first_msg_seq + (uint64_t)i, b->time_ns, source_seq,
                     (uint16_t)b->source_stream, (uint16_t)b->flags, p.data, p.len);
        offset += RECORD_HEADER_SIZE + p.len;
        payload_close(&p);
    }
    *new_offset = offset;
    *next = i;
    return 0;
}

static int check_range(Py_ssize_t count, Py_ssize_t *start, Py_ssize_t *stop) {
    if (*stop < 0 || *stop > count) {
        *stop = count;
    }
    if (*start < 0 || *start > *stop) {
        PyErr_Format(PyExc_ValueError, "start out of range 0..%zd: %zd", *stop, *start);
        return -1;
    }
    return 0;
}

/* Offset and limit within a destination of `len` bytes; limit < offset frames nothing. */
static int check_window(Py_ssize_t len, Py_ssize_t offset, Py_ssize_t *limit) {
    if (offset < 0 || offset > len) {
        PyErr_Format(PyExc_ValueError, "offset out of range 0..%zd: %zd", len, offset);
        return -1;
    }
    if (*limit > len) {
        *limit = len;
    }
    if (*limit < offset) {
        *limit = offset;
    }
    return 0;
}

static PyObject *py_frame_records(PyObject *Py_UNUSED(self), PyObject *args, PyObject *kwargs) {
    static char *keywords[] = {"first_msg_seq", "time_ns", "source_stream", "source_seqs", "payloads", "flags", NULL};
    PyObject *first, *time_ns, *stream, *seqs, *payloads, *flags = NULL;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OOOOO|O:frame_records", keywords, &first, &time_ns, &stream,
                                     &seqs, &payloads, &flags)) {
        return NULL;
    }
    Batch b;
    if (batch_open(&b, first, time_ns, stream, seqs, payloads, flags) < 0) {
        return NULL;
    }
    /* Size first (payload types and lengths are checked again, cheaply, while framing). */
    Py_ssize_t total = 0;
    PyObject **items = PySequence_Fast_ITEMS(b.payloads);
    for (Py_ssize_t i = 0; i < b.count; i++) {
        Payload p;
        if (payload_open(&p, items[i], i) < 0) {
            batch_close(&b);
            return NULL;
        }
        total += RECORD_HEADER_SIZE + p.len;
        payload_close(&p);
    }
    PyObject *out = PyBytes_FromStringAndSize(NULL, total);
    if (out == NULL) {
        batch_close(&b);
        return NULL;
    }
    Py_ssize_t end, next;
    int rc = batch_frame(&b, (uint8_t *)PyBytes_AS_STRING(out), 0, total, 0, b.count, &end, &next);
    batch_close(&b);
    if (rc < 0) {
        Py_DECREF(out);
        return NULL;
    }
    if (end != total || next != b.count) { /* a payload changed size while we held no reference to its data */
        Py_DECREF(out);
        PyErr_SetString(PyExc_RuntimeError, "payloads changed while being framed");
        return NULL;
    }
    return out;
}

static PyObject *py_frame_into(PyObject *Py_UNUSED(self), PyObject *args, PyObject *kwargs) {
    static char *keywords[] = {"buf",         "offset",   "limit", "first_msg_seq", "time_ns", "source_stream",
                               "source_seqs", "payloads", "start", "stop",          "flags",   NULL};
    PyObject *buf, *first, *time_ns, *stream, *seqs, *payloads, *flags = NULL;
    Py_ssize_t offset, limit, start = 0, stop = -1;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OnnOOOOO|nnO:frame_into", keywords, &buf, &offset, &limit,
                                     &first, &time_ns, &stream, &seqs, &payloads, &start, &stop, &flags)) {
        return NULL;
    }
    Dest d;
    if (dest_open(&d, buf) < 0) {
        return NULL;
    }
    Batch b;
    if (check_window(d.len, offset, &limit) < 0 || batch_open(&b, first, time_ns, stream, seqs, payloads, flags) < 0) {
        dest_close(&d);
        return NULL;
    }
    Py_ssize_t end = offset, next = 0;
    int rc = check_range(b.count, &start, &stop);
    if (rc == 0) {
        rc = batch_frame(&b, d.data, offset, limit, start, stop, &end, &next);
    }
    batch_close(&b);
    dest_close(&d);
    if (rc < 0) {
        return NULL;
    }
    return Py_BuildValue("(nn)", end, next);
}

/* -- one record, and records given as tuples --------------------------------------------------- */

static PyObject *py_frame_one_into(PyObject *Py_UNUSED(self), PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 7 && nargs != 8) {
        PyErr_Format(PyExc_TypeError,
                     "frame_one_into(buf, offset, msg_seq, time_ns, source_stream, source_seq, payload[, flags]) "
                     "takes 7 or 8 arguments (%zd given)",
                     nargs);
        return NULL;
    }
    Py_ssize_t offset;
    uint64_t msg_seq, time_ns, stream, source_seq, flags = 0;
    if (as_ssize(args[1], "offset", &offset) < 0 || as_uint(args[2], "msg_seq", UINT64_MAX, &msg_seq) < 0 ||
        as_uint(args[3], "time_ns", UINT64_MAX, &time_ns) < 0 ||
        as_uint(args[4], "source_stream", UINT16_MAX, &stream) < 0 ||
        as_uint(args[5], "source_seq", UINT64_MAX, &source_seq) < 0 ||
        (nargs == 8 && as_uint(args[7], "flags", UINT16_MAX, &flags) < 0)) {
        return NULL;
    }
    Payload p;
    if (payload_open(&p, args[6], 0) < 0) {
        return NULL;
    }
    Dest d;
    if (dest_open(&d, args[0]) < 0) {
        payload_close(&p);
        return NULL;
    }
    PyObject *result = NULL;
    if (offset < 0 || offset > d.len || p.len > d.len - offset - RECORD_HEADER_SIZE) {
        PyErr_Format(PyExc_ValueError, "record of %zd bytes does not fit in buf at offset %zd (size %zd)",
                     RECORD_HEADER_SIZE + p.len, offset, d.len);
    } else {
        write_record(d.data + offset, msg_seq, time_ns, source_seq, (uint16_t)stream, (uint16_t)flags, p.data, p.len);
        result = PyLong_FromSsize_t(offset + RECORD_HEADER_SIZE + p.len);
    }
    dest_close(&d);
    payload_close(&p);
    return result;
}

/* The numbers of a (msg_seq, time_ns, source_stream, source_seq, payload[, flags]) tuple (a Record
 * has the flags); TypeError or ValueError naming records[i] or the field when it is not one. */
static int record_tuple_fields(PyObject *item, Py_ssize_t i, uint64_t *msg_seq, uint64_t *time_ns, uint64_t *stream,
                               uint64_t *source_seq, uint64_t *flags) {
    if (!PyTuple_Check(item) || (PyTuple_GET_SIZE(item) != 5 && PyTuple_GET_SIZE(item) != 6)) {
        PyErr_Format(PyExc_TypeError,
                     "records[%zd] must be a (msg_seq, time_ns, source_stream, source_seq, payload[, flags]) "
                     "tuple, not %.100s",
                     i, Py_TYPE(item)->tp_name);
        return -1;
    }
    *flags = 0;
    if (as_uint(PyTuple_GET_ITEM(item, 0), "msg_seq", UINT64_MAX, msg_seq) < 0 ||
        as_uint(PyTuple_GET_ITEM(item, 1), "time_ns", UINT64_MAX, time_ns) < 0 ||
        as_uint(PyTuple_GET_ITEM(item, 2), "source_stream", UINT16_MAX, stream) < 0 ||
        as_uint(PyTuple_GET_ITEM(item, 3), "source_seq", UINT64_MAX, source_seq) < 0 ||
        (PyTuple_GET_SIZE(item) == 6 && as_uint(PyTuple_GET_ITEM(item, 5), "flags", UINT16_MAX, flags) < 0)) {
        return -1;
    }
    return 0;
}

/* Frame records[i] at dst + *offset if its msg_seq exceeds *last (when *have_last), its time is
 * before day_end and it ends at or before limit: 1 framed (*offset and *last advanced), 0 not
 * (the caller's slow path decides: SequenceError, a new segment, a flush), -1 error. */
static int frame_tuple(PyObject *item, Py_ssize_t i, uint8_t *dst, Py_ssize_t *offset, Py_ssize_t limit,
                       uint64_t day_end, bool *have_last, uint64_t *last) {
    uint64_t msg_seq, time_ns, stream, source_seq, flags;
    if (record_tuple_fields(item, i, &msg_seq, &time_ns, &stream, &source_seq, &flags) < 0) {
        return -1;
    }
    if ((*have_last && msg_seq <= *last) || time_ns >= day_end) {
        return 0;
    }
    Payload p;
    if (payload_open(&p, PyTuple_GET_ITEM(item, 4), i) < 0) {
        return -1;
    }
    int framed = p.len <= limit - *offset - RECORD_HEADER_SIZE;
    if (framed) {
        write_record(dst + *offset, msg_seq, time_ns, source_seq, (uint16_t)stream, (uint16_t)flags, p.data, p.len);
        *offset += RECORD_HEADER_SIZE + p.len;
        *last = msg_seq;
        *have_last = true;
    }
    payload_close(&p);
    return framed;
}

static PyObject *py_frame_tuples_into(PyObject *Py_UNUSED(self), PyObject *args, PyObject *kwargs) {
    static char *keywords[] = {"buf", "offset", "limit", "records", "last_seq", "day_end_ns", "start", "stop", NULL};
    PyObject *buf, *records_obj, *last_obj, *day_end_obj;
    Py_ssize_t offset, limit, start = 0, stop = -1;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OnnOOO|nn:frame_tuples_into", keywords, &buf, &offset, &limit,
                                     &records_obj, &last_obj, &day_end_obj, &start, &stop)) {
        return NULL;
    }
    bool have_last;
    uint64_t last, day_end;
    if (as_optional_seq(last_obj, "last_seq", &have_last, &last) < 0 ||
        as_uint(day_end_obj, "day_end_ns", UINT64_MAX, &day_end) < 0) {
        return NULL;
    }
    PyObject *records = PySequence_Fast(records_obj, "records must be a sequence of tuples");
    if (records == NULL) {
        return NULL;
    }
    Dest d;
    if (dest_open(&d, buf) < 0) {
        Py_DECREF(records);
        return NULL;
    }
    PyObject **items = PySequence_Fast_ITEMS(records);
    PyObject *result = NULL;
    Py_ssize_t i = start;
    if (check_window(d.len, offset, &limit) < 0 || check_range(PySequence_Fast_GET_SIZE(records), &start, &stop) < 0) {
        goto done;
    }
    for (i = start; i < stop; i++) {
        int framed = frame_tuple(items[i], i, d.data, &offset, limit, day_end, &have_last, &last);
        if (framed < 0) {
            goto done;
        }
        if (framed == 0) {
            break;
        }
    }
    if (have_last) {
        result = Py_BuildValue("(nnK)", offset, i, (unsigned long long)last);
    } else {
        result = Py_BuildValue("(nnO)", offset, i, last_obj);
    }
done:
    dest_close(&d);
    Py_DECREF(records);
    return result;
}

/* -- decoding ---------------------------------------------------------------------------------- */

/* record_type must be a tuple subclass with no extra fields (like a NamedTuple): make_record
 * fills its items directly. */
static int check_record_type(PyTypeObject *type) {
    if (!PyType_IsSubtype(type, &PyTuple_Type) || type->tp_basicsize != PyTuple_Type.tp_basicsize ||
        type->tp_itemsize != PyTuple_Type.tp_itemsize || type->tp_dictoffset != 0) {
        PyErr_Format(PyExc_TypeError, "record_type must be a tuple subclass with no extra fields: %R", (PyObject *)type);
        return -1;
    }
    return 0;
}

/* A new record_type instance of RECORD_FIELDS items (a Record's, in its order). Steals the items. */
static PyObject *make_record(PyTypeObject *type, PyObject *items[RECORD_FIELDS]) {
    PyObject *record = type == &PyTuple_Type ? PyTuple_New(RECORD_FIELDS) : type->tp_alloc(type, RECORD_FIELDS);
    if (record == NULL) {
        for (int k = 0; k < RECORD_FIELDS; k++) {
            Py_XDECREF(items[k]);
        }
        return NULL;
    }
    for (int k = 0; k < RECORD_FIELDS; k++) {
        PyTuple_SET_ITEM(record, k, items[k]);
    }
    return record;
}

/* A control record (a flag of CONTROL_FLAGS set; bit 0: purge) takes no msg_seq of its own. Its
 * msg_seq field names the last message record before it, so it may equal prev; it does not move
 * prev. */

/* Whether the `avail` bytes at h start with a whole, intact record whose msg_seq exceeds prev
 * (when have_prev; a control record's may equal it): true with its payload length and whether it
 * is a control record, or false with why not (a STATUS_*). */
static bool check_record(const uint8_t *h, Py_ssize_t avail, bool have_prev, uint64_t prev, uint32_t *length,
                         bool *control, int *status) {
    if (avail < RECORD_HEADER_SIZE) {
        *status = avail == 0 ? STATUS_END : STATUS_INCOMPLETE;
        return false;
    }
    *length = get_u32le(h + 4);
    *control = (get_u16le(h + 34) & CONTROL_FLAGS) != 0;
    uint64_t seq = load_u64le(h + 8);
    if (*length > MAX_PAYLOAD_BYTES) {
        *status = STATUS_BAD_LENGTH;
    } else if ((Py_ssize_t)*length > avail - RECORD_HEADER_SIZE) {
        *status = STATUS_INCOMPLETE;
    } else if (crc32c_value(0, h + 4, RECORD_HEADER_SIZE - 4 + (size_t)*length) != get_u32le(h)) {
        *status = STATUS_BAD_CRC;
    } else if (have_prev && (*control ? seq < prev : seq <= prev)) {
        *status = STATUS_BAD_SEQ;
    } else {
        return true;
    }
    return false;
}

/* The checked record at h as a record_type (msg_seq, time_ns, source_stream, source_seq, payload, flags). */
static PyObject *decode_record(PyTypeObject *type, const uint8_t *h, uint32_t length) {
    PyObject *items[RECORD_FIELDS] = {
        PyLong_FromUnsignedLongLong(load_u64le(h + 8)),
        PyLong_FromUnsignedLongLong(load_u64le(h + 16)),
        PyLong_FromLong(get_u16le(h + 32)),
        PyLong_FromUnsignedLongLong(load_u64le(h + 24)),
        PyBytes_FromStringAndSize((const char *)h + RECORD_HEADER_SIZE, (Py_ssize_t)length),
        PyLong_FromLong(get_u16le(h + 34)),
    };
    if (!items[0] || !items[1] || !items[2] || !items[3] || !items[4] || !items[5]) {
        for (int k = 0; k < RECORD_FIELDS; k++) {
            Py_XDECREF(items[k]);
        }
        return NULL;
    }
    return make_record(type, items);
}

/* One control record for the caller's list: (index of the message record it precedes, flags, record). */
static int append_control(PyObject *controls, Py_ssize_t before, PyTypeObject *type, const uint8_t *h,
                          uint32_t length) {
    PyObject *record = decode_record(type, h, length);
    if (record == NULL) {
        return -1;
    }
    PyObject *item = Py_BuildValue("(niN)", before, (int)get_u16le(h + 34), record);
    if (item == NULL) {
        return -1;
    }
    int rc = PyList_Append(controls, item);
    Py_DECREF(item);
    return rc;
}

static PyObject *py_decode_records(PyObject *Py_UNUSED(self), PyObject *args, PyObject *kwargs) {
    static char *keywords[] = {"data", "pos", "prev_seq", "max_records", "record_type", "controls", NULL};
    Py_buffer data;
    Py_ssize_t pos, max_records;
    PyObject *prev_obj, *controls = Py_None;
    PyTypeObject *type;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "y*nOnO!|O:decode_records", keywords, &data, &pos, &prev_obj,
                                     &max_records, &PyType_Type, &type, &controls)) {
        return NULL;
    }
    PyObject *records = NULL, *result = NULL;
    bool have_prev, control;
    uint64_t prev;
    int status = STATUS_END;
    const uint8_t *base = data.buf;
    if (check_record_type(type) < 0) {
        goto done;
    }
    if (controls != Py_None && !PyList_Check(controls)) {
        PyErr_SetString(PyExc_TypeError, "controls must be a list or None");
        goto done;
    }
    if (pos < 0 || pos > data.len) {
        PyErr_Format(PyExc_ValueError, "pos out of range 0..%zd: %zd", data.len, pos);
        goto done;
    }
    if (as_optional_seq(prev_obj, "prev_seq", &have_prev, &prev) < 0 || (records = PyList_New(0)) == NULL) {
        goto done;
    }
    uint32_t length;
    while ((max_records < 0 || PyList_GET_SIZE(records) < max_records) &&
           check_record(base + pos, data.len - pos, have_prev, prev, &length, &control, &status)) {
        if (control) { /* not a message: handed over apart (or skipped), prev unchanged */
            if (controls != Py_None &&
                append_control(controls, PyList_GET_SIZE(records), type, base + pos, length) < 0) {
                goto done;
            }
            pos += RECORD_HEADER_SIZE + (Py_ssize_t)length;
            continue;
        }
        PyObject *record = decode_record(type, base + pos, length);
        if (record == NULL || PyList_Append(records, record) < 0) {
            Py_XDECREF(record);
            goto done;
        }
        Py_DECREF(record);
        prev = load_u64le(base + pos + 8);
        have_prev = true;
        pos += RECORD_HEADER_SIZE + (Py_ssize_t)length;
    }
    result = Py_BuildValue("(Oni)", records, pos, status);
done:
    Py_XDECREF(records);
    PyBuffer_Release(&data);
    return result;
}

/* -- group commit I/O -------------------------------------------------------------------------- */

static int write_fully(int fd, const uint8_t *p, Py_ssize_t n) {
    while (n > 0) {
        ssize_t done = write(fd, p, (size_t)n);
        if (done < 0) {
            if (errno == EINTR) {
                continue;
            }
            return errno;
        }
        p += done;
        n -= done;
    }
    return 0;
}

/* The group commit proper, run without the GIL: 0 or an errno. */
static int write_group(int fd, const Py_buffer *views, Py_ssize_t count, int sync, int index_fd,
                       const Py_buffer *index) {
    int err = 0;
    for (Py_ssize_t i = 0; i < count && err == 0; i++) {
        err = write_fully(fd, views[i].buf, views[i].len);
    }
    if (err == 0 && sync && fsync(fd) < 0) {
        err = errno;
    }
    if (err == 0 && index_fd >= 0 && index->obj != NULL && index->len > 0) {
        err = write_fully(index_fd, index->buf, index->len);
    }
    return err;
}

/*
 * One group commit with one release of the GIL: write every chunk to fd, fsync it if asked, then
 * write index_data to index_fd. Doing this as separate os.write/os.fsync calls made the flusher
 * thread wait for the GIL once per call (up to the 5 ms switch interval each while the owner
 * thread frames records), which stalled the owner on full buffers.
 */
static PyObject *py_write_out(PyObject *Py_UNUSED(self), PyObject *args, PyObject *kwargs) {
    static char *keywords[] = {"fd", "chunks", "sync", "index_fd", "index_data", NULL};
    int fd, sync, index_fd = -1;
    PyObject *chunks_obj;
    Py_buffer index;
    memset(&index, 0, sizeof(index));
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "iOp|iy*:write_out", keywords, &fd, &chunks_obj, &sync, &index_fd,
                                     &index)) {
        return NULL;
    }
    PyObject *chunks = PySequence_Fast(chunks_obj, "chunks must be a sequence of bytes-like objects");
    if (chunks == NULL) {
        if (index.obj != NULL) {
            PyBuffer_Release(&index);
        }
        return NULL;
    }
    Py_ssize_t count = PySequence_Fast_GET_SIZE(chunks);
    Py_buffer *views = PyMem_Calloc((size_t)(count > 0 ? count : 1), sizeof(Py_buffer));
    PyObject *result = NULL;
    Py_ssize_t got = 0;
    if (views == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    for (; got < count; got++) {
        if (PyObject_GetBuffer(PySequence_Fast_GET_ITEM(chunks, got), &views[got], PyBUF_SIMPLE) < 0) {
            goto done;
        }
    }
    int err;
    Py_BEGIN_ALLOW_THREADS
    err = write_group(fd, views, count, sync, index_fd, &index);
    Py_END_ALLOW_THREADS
    if (err != 0) {
        errno = err;
        PyErr_SetFromErrno(PyExc_OSError);
        goto done;
    }
    result = Py_NewRef(Py_None);
done:
    for (Py_ssize_t i = 0; i < got; i++) {
        PyBuffer_Release(&views[i]);
    }
    PyMem_Free(views);
    Py_DECREF(chunks);
    if (index.obj != NULL) {
        PyBuffer_Release(&index);
    }
    return result;
}

/* -- the writer's live tail, shared with the source pump ---------------------------------------- */

/*
 * An Appender is the part of a JournalWriter (adapter/journal/writer.py) its fast path reads and
 * moves: the live group-commit buffer, its published end (the flusher writes up to `pos`), the
 * limit a record must end at or before (the buffer's end, the segment's size budget, the next
 * index entry: -1 sends every record through the writer's slow path), the end of the segment's
 * UTC day, the last msg_seq, and the flusher's `idle` flag. They are plain slots, which the
 * writer's Python code reads and moves for every record as fast as its own attributes (a getter
 * that made a new int each time cost it a third); append_run (the capsule's, _append_api.h) reads
 * them, frames a run of records straight into the buffer while each fits, as
 * JournalWriter.append_batch's fast path does, publishes the new end, and hands the rest to `slow`
 * (the writer's append_batch, which rolls segments, adds index entries, raises the errors), so the
 * source pump journals with no call into Python but where the writer has something to decide.
 * After publishing it wakes an idle flusher (`wake`), as the writer's _publish does. Any slot may
 * be set from Python to anything: a value that is not what it should be frames nothing here (the
 * writer's path decides), and the buffer is framed into only within its size.
 */
typedef struct {
    PyObject_HEAD
    PyObject *buf;      /* the live buffer: a bytearray */
    PyObject *pos;      /* int: the published end */
    PyObject *limit;    /* int: records end at or before it (at most the buffer's size); -1: none here */
    PyObject *day_end;  /* int: records are stamped before it (ns since the epoch) */
    PyObject *last_seq; /* int: the last msg_seq appended (-1: none) */
    PyObject *idle;     /* bool: the flusher sleeps until woken */
    PyObject *slow;     /* append_batch(first_msg_seq, time_ns, source_stream, source_seqs, payloads) */
    PyObject *wake;     /* wake(), or None */
} AppenderObject;

static PyTypeObject AppenderType;

/* The tail's numbers, when each is an int in range: 1; 0 when the fast path may not run. */
static int appender_read(AppenderObject *a, Py_ssize_t *pos, Py_ssize_t *limit, uint64_t *day_end, bool *have_last,
                         uint64_t *last) {
    if (a->pos == NULL || a->limit == NULL || a->day_end == NULL || a->last_seq == NULL || !PyLong_CheckExact(a->pos) ||
        !PyLong_CheckExact(a->limit) || !PyLong_CheckExact(a->day_end) || !PyLong_CheckExact(a->last_seq))
        return 0;
    int overflow = 0;
    *pos = PyLong_AsSsize_t(a->pos);
    *limit = PyLong_AsSsize_t(a->limit);
    *day_end = PyLong_AsUnsignedLongLong(a->day_end);
    long long signed_last = PyLong_AsLongLongAndOverflow(a->last_seq, &overflow);
    *have_last = overflow > 0 || signed_last >= 0;
    *last = overflow > 0 ? PyLong_AsUnsignedLongLong(a->last_seq) : (uint64_t)signed_last;
    if (PyErr_Occurred()) { /* out of range: not this path's to say */
        PyErr_Clear();
        return 0;
    }
    return 1;
}

/* The records that fit, framed at pos: how many (0 when the fast path may not run), or -1 with an
   exception (no memory for the new position's ints: nothing is published). */
static Py_ssize_t appender_fast(AppenderObject *a, uint64_t first, uint64_t time_ns, uint16_t stream,
                                uint64_t first_source, PyObject *payloads) {
    Py_ssize_t off, limit;
    uint64_t day_end, last;
    bool have_last;
    if (a->buf == NULL || !PyByteArray_CheckExact(a->buf) || !appender_read(a, &off, &limit, &day_end, &have_last, &last) ||
        time_ns >= day_end || (have_last && first <= last))
        return 0;
    Py_ssize_t size = PyByteArray_GET_SIZE(a->buf);
    if (limit > size) limit = size;
    if (off < 0 || off > limit) return 0;
    uint8_t *dst = (uint8_t *)PyByteArray_AS_STRING(a->buf);
    Py_ssize_t count = PyList_GET_SIZE(payloads), done = 0;
    for (; done < count; done++) {
        PyObject *item = PyList_GET_ITEM(payloads, done);
        if (!PyBytes_CheckExact(item)) break; /* the writer's path says what is wrong with it */
        Py_ssize_t len = PyBytes_GET_SIZE(item);
        if (len > MAX_PAYLOAD_BYTES || len > limit - off - RECORD_HEADER_SIZE) break;
        write_record(dst + off, first + (uint64_t)done, time_ns, first_source + (uint64_t)done, stream, 0,
                     (const uint8_t *)PyBytes_AS_STRING(item), len);
        off += RECORD_HEADER_SIZE + len;
    }
    if (done == 0) return 0;
    PyObject *pos = PyLong_FromSsize_t(off), *last_seq = PyLong_FromUnsignedLongLong(first + (uint64_t)done - 1);
    if (pos == NULL || last_seq == NULL) {
        Py_XDECREF(pos);
        Py_XDECREF(last_seq);
        return -1;
    }
    Py_SETREF(a->pos, pos);
    Py_SETREF(a->last_seq, last_seq);
    return done;
}

/* The records from `done` on, through the writer's append_batch: 0, or -1 with its exception. */
static int appender_slow(AppenderObject *a, uint64_t first, uint64_t time_ns, unsigned int stream,
                         uint64_t first_source, PyObject *payloads, Py_ssize_t done) {
    if (a->slow == NULL) {
        PyErr_SetString(PyExc_AttributeError, "the Appender has no slow path (slow was deleted)");
        return -1;
    }
    Py_ssize_t count = PyList_GET_SIZE(payloads);
    PyObject *start = PyLong_FromUnsignedLongLong(first_source + (uint64_t)done), *left = PyLong_FromSsize_t(count - done);
    PyObject *end = start && left ? PyNumber_Add(start, left) : NULL;
    PyObject *seqs = end ? PyObject_CallFunctionObjArgs((PyObject *)&PyRange_Type, start, end, NULL) : NULL;
    PyObject *rest = seqs ? PyList_GetSlice(payloads, done, count) : NULL;
    PyObject *result = NULL;
    if (rest != NULL) {
        PyObject *msg = PyLong_FromUnsignedLongLong(first), *delta = PyLong_FromSsize_t(done);
        PyObject *at = msg && delta ? PyNumber_Add(msg, delta) : NULL; /* past 2**64-1: the writer says so */
        if (at != NULL)
            result = PyObject_CallFunction(a->slow, "OKIOO", at, (unsigned long long)time_ns, stream, seqs, rest);
        Py_XDECREF(msg);
        Py_XDECREF(delta);
        Py_XDECREF(at);
    }
    Py_XDECREF(start);
    Py_XDECREF(left);
    Py_XDECREF(end);
    Py_XDECREF(seqs);
    Py_XDECREF(rest);
    if (result == NULL) return -1;
    Py_DECREF(result);
    return 0;
}

static int appender_append_run(PyObject *obj, uint64_t first_msg_seq, uint64_t time_ns, unsigned int source_stream,
                               uint64_t first_source_seq, PyObject *payloads) {
    if (!PyObject_TypeCheck(obj, &AppenderType) || !PyList_Check(payloads)) {
        PyErr_SetString(PyExc_TypeError, "append_run needs an Appender and a list of payloads");
        return -1;
    }
    AppenderObject *a = (AppenderObject *)obj;
    Py_ssize_t count = PyList_GET_SIZE(payloads), done = 0;
    if (count == 0) return 0;
    if (source_stream <= UINT16_MAX && first_msg_seq <= UINT64_MAX - (uint64_t)(count - 1) &&
        first_source_seq <= UINT64_MAX - (uint64_t)(count - 1))
        done = appender_fast(a, first_msg_seq, time_ns, (uint16_t)source_stream, first_source_seq, payloads);
    if (done < 0) return -1;
    if (done > 0 && a->idle != NULL && a->idle == Py_True && a->wake != NULL && a->wake != Py_None) {
        PyObject *woken = PyObject_CallNoArgs(a->wake); /* as JournalWriter._publish */
        if (woken == NULL) return -1;
        Py_DECREF(woken);
    }
    if (done == count) return 0;
    return appender_slow(a, first_msg_seq, time_ns, source_stream, first_source_seq, payloads, done);
}

static PyObject *Appender_append_run(AppenderObject *self, PyObject *args) {
    unsigned long long first, time_ns, first_source;
    unsigned int stream;
    PyObject *payloads;
    if (!PyArg_ParseTuple(args, "KKIKO!:append_run", &first, &time_ns, &stream, &first_source, &PyList_Type,
                          &payloads))
        return NULL;
    if (appender_append_run((PyObject *)self, first, time_ns, stream, first_source, payloads) < 0) return NULL;
    Py_RETURN_NONE;
}

static PyObject *Appender_new(PyTypeObject *type, PyObject *args, PyObject *kwds) {
    static char *kwlist[] = {"slow", "wake", NULL};
    PyObject *slow, *wake = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "O|O:Appender", kwlist, &slow, &wake)) return NULL;
    if (!PyCallable_Check(slow) || (wake != Py_None && !PyCallable_Check(wake))) {
        PyErr_SetString(PyExc_TypeError, "Appender: slow must be callable, wake callable or None");
        return NULL;
    }
    AppenderObject *self = (AppenderObject *)type->tp_alloc(type, 0);
    if (self == NULL) return NULL;
    self->slow = Py_NewRef(slow);
    self->wake = Py_NewRef(wake);
    self->idle = Py_NewRef(Py_False);
    self->buf = PyByteArray_FromStringAndSize(NULL, 0);
    self->pos = PyLong_FromLong(0);
    self->limit = PyLong_FromLong(-1);
    self->day_end = PyLong_FromLong(0);
    self->last_seq = PyLong_FromLong(-1);
    if (!self->buf || !self->pos || !self->limit || !self->day_end || !self->last_seq) {
        Py_DECREF(self);
        return NULL;
    }
    return (PyObject *)self;
}

static int Appender_traverse(AppenderObject *self, visitproc visit, void *arg) {
    Py_VISIT(self->buf);
    Py_VISIT(self->slow);
    Py_VISIT(self->wake);
    return 0;
}

static int Appender_clear(AppenderObject *self) {
    Py_CLEAR(self->buf);
    Py_CLEAR(self->slow);
    Py_CLEAR(self->wake);
    return 0;
}

static void Appender_dealloc(AppenderObject *self) {
    PyObject_GC_UnTrack(self);
    Appender_clear(self);
    Py_CLEAR(self->pos);
    Py_CLEAR(self->limit);
    Py_CLEAR(self->day_end);
    Py_CLEAR(self->last_seq);
    Py_CLEAR(self->idle);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyMemberDef Appender_members[] = {
    {"buf", T_OBJECT_EX, offsetof(AppenderObject, buf), 0, "the live buffer (a bytearray)"},
    {"pos", T_OBJECT_EX, offsetof(AppenderObject, pos), 0, "the buffer's published end"},
    {"limit", T_OBJECT_EX, offsetof(AppenderObject, limit), 0, "records framed here end at or before it (-1: none)"},
    {"day_end_ns", T_OBJECT_EX, offsetof(AppenderObject, day_end), 0, "records framed here are stamped before it"},
    {"last_seq", T_OBJECT_EX, offsetof(AppenderObject, last_seq), 0, "the last msg_seq appended (-1: none)"},
    {"idle", T_OBJECT_EX, offsetof(AppenderObject, idle), 0, "the flusher sleeps until woken (True wakes it)"},
    {"slow", T_OBJECT_EX, offsetof(AppenderObject, slow), 0, "the writer's append_batch"},
    {"wake", T_OBJECT_EX, offsetof(AppenderObject, wake), 0, "wakes an idle flusher (or None)"},
    {NULL, 0, 0, 0, NULL},
};

static PyMethodDef Appender_methods[] = {
    {"append_run", (PyCFunction)Appender_append_run, METH_VARARGS,
     "append_run(first_msg_seq, time_ns, source_stream, first_source_seq, payloads) -> None\n\n"
     "Append records first_msg_seq, ... (source_seqs first_source_seq, ...; payloads a list of bytes): "
     "framed here while each fits, the rest through slow (the capsule's append_run)."},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject AppenderType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "feedha.adapter.journal._native.Appender",
    .tp_basicsize = sizeof(AppenderObject),
    .tp_dealloc = (destructor)Appender_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "Appender(slow, wake=None): a journal writer's live tail, which the source pump appends to "
              "(see adapter/journal/_native.c).",
    .tp_traverse = (traverseproc)Appender_traverse,
    .tp_clear = (inquiry)Appender_clear,
    .tp_new = Appender_new,
    .tp_methods = Appender_methods,
    .tp_members = Appender_members,
};

static FhAppendApi append_api = {
    .version = FH_APPEND_API_VERSION,
    .appender_type = &AppenderType,
    .append_run = appender_append_run,
};

/* -- module ------------------------------------------------------------------------------------ */

static PyMethodDef methods[] = {
    {"crc32c", (PyCFunction)(void (*)(void))py_crc32c, METH_VARARGS | METH_KEYWORDS,
     "crc32c(data, value=0) -> int\n\nCRC32C of data, continuing from value (a previous result); "
     "the crc32c package's crc32c()."},
    {"crc32c_software", (PyCFunction)(void (*)(void))py_crc32c_software, METH_VARARGS | METH_KEYWORDS,
     "crc32c_software(data, value=0) -> int\n\ncrc32c() on the table-driven path (for tests)."},
    {"frame_records", (PyCFunction)(void (*)(void))py_frame_records, METH_VARARGS | METH_KEYWORDS,
     "frame_records(first_msg_seq, time_ns, source_stream, source_seqs, payloads, flags=0) -> bytes\n\n"
     "Framed records first_msg_seq, first_msg_seq+1, ... with one time_ns."},
    {"frame_into", (PyCFunction)(void (*)(void))py_frame_into, METH_VARARGS | METH_KEYWORDS,
     "frame_into(buf, offset, limit, first_msg_seq, time_ns, source_stream, source_seqs, payloads, start=0, "
     "stop=-1, flags=0) -> (new_offset, next)\n\n"
     "Frame records start..stop-1 into buf from offset while they end at or before limit; next is the "
     "first record not framed."},
    {"frame_one_into", (PyCFunction)(void (*)(void))py_frame_one_into, METH_FASTCALL,
     "frame_one_into(buf, offset, msg_seq, time_ns, source_stream, source_seq, payload[, flags]) -> new_offset\n\n"
     "Frame one record into buf at offset (ValueError when it does not fit)."},
    {"frame_tuples_into", (PyCFunction)(void (*)(void))py_frame_tuples_into, METH_VARARGS | METH_KEYWORDS,
     "frame_tuples_into(buf, offset, limit, records, last_seq, day_end_ns, start=0, stop=-1) "
     "-> (new_offset, next, last_seq)\n\n"
     "Frame (msg_seq, time_ns, source_stream, source_seq, payload[, flags]) tuples into buf while each msg_seq "
     "exceeds the one before (last_seq first), time_ns < day_end_ns and the record ends at or before limit."},
    {"decode_records", (PyCFunction)(void (*)(void))py_decode_records, METH_VARARGS | METH_KEYWORDS,
     "decode_records(data, pos, prev_seq, max_records, record_type, controls=None) -> (records, end, status)\n\n"
     "Decode and check records from pos; status 0 end, 1 incomplete, 2 bad length, 3 bad CRC, 4 bad "
     "msg_seq. max_records < 0: no limit. Control records (flag bit 0) are not in records: appended to "
     "controls as (index of the next message record, flags, record) when it is a list, else skipped."},
    {"write_out", (PyCFunction)(void (*)(void))py_write_out, METH_VARARGS | METH_KEYWORDS,
     "write_out(fd, chunks, sync, index_fd=-1, index_data=b'') -> None\n\n"
     "Write every chunk to fd, fsync it if sync, then write index_data to index_fd: one group commit "
     "with one release of the GIL (OSError on failure)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    .m_base = PyModuleDef_HEAD_INIT,
    .m_name = "_native",
    .m_doc = "CRC32C and journal record framing in C (reference: adapter.journal._reference).",
    .m_size = -1,
    .m_methods = methods,
};

PyMODINIT_FUNC PyInit__native(void) {
    crc_init_tables();
    bool hardware = false;
#if HAVE_HARDWARE_CRC
    __builtin_cpu_init();
    if (__builtin_cpu_supports("sse4.2")) {
        crc_update = crc_update_hardware;
        hardware = true;
    }
#endif
    if (PyType_Ready(&AppenderType) < 0) {
        return NULL;
    }
    PyObject *m = PyModule_Create(&module);
    if (m == NULL) {
        return NULL;
    }
    PyObject *api = PyCapsule_New(&append_api, FH_APPEND_CAPSULE, NULL);
    int failed = api == NULL || PyModule_AddObjectRef(m, "APPEND_API", api) < 0;
    Py_XDECREF(api);
    /* Every shared constant too, so the tests can tell a build from an older header. */
    if (failed ||
        PyModule_AddObjectRef(m, "Appender", (PyObject *)&AppenderType) < 0 ||
        PyModule_AddObjectRef(m, "HARDWARE_CRC", hardware ? Py_True : Py_False) < 0 || fh_add_constants(m) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
