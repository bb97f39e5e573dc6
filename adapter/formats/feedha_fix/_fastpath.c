/*
 * adapter.formats.feedha_fix._fastpath: feedha-fix's per-message hot path in C.
 *
 * Theory of operation
 * -------------------
 * The Python path (the adapter core, adapter/core/, over adapter/conversion/ and
 * this folder) handles one source message at a time: FIX framing, field parsing and
 * conversion (parser.py), the conversion state and its digest (state.py),
 * msg_seq numbering, protobuf encoding (codec.py) and wire blocks
 * (proto/wire.py). That costs ~30 us of Python per message. This module does the same work, but the numbering, for
 * *runs* of ordinary messages:
 *
 *   State     the conversion state: symbol -> values, each symbol's BLAKE2b-64
 *             hash and the order-independent sum of them (the digest). The
 *             Python ConversionState delegates to it, so both paths share it.
 *             Symbols are found through an open-addressed index by their
 *             SipHash-1-3 under this process's random key (_siphash.h): a
 *             feed cannot send names chosen to share a slot.
 *   FastPath  FastPath.run(frame, pos, ...) walks a source frame from ``pos``,
 *             and for every message that is well-formed, strictly in sequence
 *             and before the next position the sync rules watch, it converts,
 *             applies and encodes it into a wire block. The core numbers
 *             the run: its messages take the next msg_seqs in order.
 *
 * The rule that keeps the two paths identical: the C path *accepts* only a
 * strict subset of inputs (canonical numbers, no duplicate fields, ASCII
 * symbols, the converter-table features adapter/formats/feedha_fix/_fastpath_spec.py's
 * compile_spec accepts) and stops at anything else, returning where it stopped; the core
 * hands that one message to the Python path (which names the error,
 * resynchronizes, or applies a sync rule) and calls run() again after it.
 * Everything the C path produces is byte for byte what the Python path
 * produces for the same input; tests/unit/adapter/test_fastpath.py checks it
 * with hypothesis.
 *
 * The MarketUpdate encoder writes protobuf by hand (deterministic order, zero
 * scalars omitted, as upb's SerializeToString(deterministic=True)). Its field
 * numbers and tags come from _market_fields.h, which scripts/gen_proto.py
 * generates from proto/market.proto and refuses to write when the schema no
 * longer matches what the encoder assumes.
 *
 * Layout: BLAKE2b, the State type, the output buffer and protobuf primitives,
 * then the fast path: FIX number/time parsing, convert() (one message body ->
 * Message), next_message() (FIX framing), encode_update() (Message + values ->
 * MarketUpdate bytes), the spec reader behind FastPath(), and run().
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "_blake2b.h"           /* blake2b_64, shared with _orders.c */
#include "_fix_checksum.h"      /* fix_byte_sum, shared with _orders.c */
#include "_protowire.h"         /* Buf and the protobuf primitives, shared with _orders.c */
#include "_siphash.h"           /* sip_bytes: the index's keyed hash, shared with _orders.c */
#include "_fastpath_constants.h" /* generated from the Python definitions by scripts/gen_constants.py */
#include "_market_fields.h"      /* generated from proto/market.proto by scripts/gen_proto.py */

/* ---- BLAKE2b-64: blake2b_64() (_blake2b.h) ---- */

/* ---- the conversion state ---- */

typedef struct {
    int64_t volume;
    double high, low, last, vwap;
    int64_t trade_count;
    double bid, ask, notional;
} Values;

typedef struct {
    char *key;
    Py_ssize_t len;
    uint64_t slot_hash; /* where the index looks for it: sip_bytes of the name */
    uint64_t hash;      /* this symbol's share of the digest */
    Values v;
} Symbol;

typedef struct {
    PyObject_HEAD
    Symbol *symbols; /* in first-seen order (ConversionState.snapshot() keeps it) */
    Py_ssize_t count, capacity;
    uint32_t *index; /* open addressing: symbol position + 1, 0 = empty */
    size_t index_mask;
    uint64_t digest;
    uint64_t salt; /* the session's share of the digest (adapter/conversion/state.py session_digest) */
    Py_ssize_t max_symbols; /* a run stops at a message naming a new symbol past it (symbol_limit) */
    uint64_t probes;        /* index slots looked at by lookups (tests read it) */
} StateObject;


/* blake2b over  symbol_utf8 + b"\0" + struct.pack(">qddddqddd", values)  (adapter/conversion/state.py). */
static uint64_t symbol_hash(const char *key, Py_ssize_t len, const Values *v) {
    uint8_t stack[256];
    size_t total = (size_t)len + 1 + 72;
    uint8_t *buf = total <= sizeof stack ? stack : PyMem_Malloc(total);
    if (buf == NULL) {
        PyErr_NoMemory(); /* callers check PyErr_Occurred() */
        return 0;
    }
    memcpy(buf, key, (size_t)len);
    uint8_t *p = buf + len;
    *p++ = 0;
    put_be64(p, (uint64_t)v->volume);
    put_be64(p + 8, dbits(v->high));
    put_be64(p + 16, dbits(v->low));
    put_be64(p + 24, dbits(v->last));
    put_be64(p + 32, dbits(v->vwap));
    put_be64(p + 40, (uint64_t)v->trade_count);
    put_be64(p + 48, dbits(v->bid));
    put_be64(p + 56, dbits(v->ask));
    put_be64(p + 64, dbits(v->notional));
    uint64_t h = blake2b_64(buf, total);
    if (buf != stack) PyMem_Free(buf);
    return h;
}

static int state_grow_index(StateObject *self) {
    size_t size = self->index_mask ? (self->index_mask + 1) * 2 : 1024;
    uint32_t *index = PyMem_Calloc(size, sizeof(uint32_t));
    if (index == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    for (Py_ssize_t i = 0; i < self->count; i++) {
        size_t slot = self->symbols[i].slot_hash & (size - 1);
        while (index[slot]) slot = (slot + 1) & (size - 1);
        index[slot] = (uint32_t)(i + 1);
    }
    PyMem_Free(self->index);
    self->index = index;
    self->index_mask = size - 1;
    return 0;
}

static Symbol *state_find(StateObject *self, const char *key, Py_ssize_t len, uint64_t hash) {
    if (!self->index_mask) return NULL;
    size_t slot = hash & self->index_mask;
    uint32_t at;
    while ((at = self->index[slot]) != 0) {
        Symbol *s = &self->symbols[at - 1];
        self->probes++;
        if (s->slot_hash == hash && s->len == len && memcmp(s->key, key, (size_t)len) == 0) return s;
        slot = (slot + 1) & self->index_mask;
    }
    return NULL;
}

/* Find or add a symbol (new ones start at zero values and a zero hash). NULL + exception on failure. */
static Symbol *state_get(StateObject *self, const char *key, Py_ssize_t len) {
    uint64_t hash = sip_bytes(key, (size_t)len);
    Symbol *found = state_find(self, key, len, hash);
    if (found != NULL) return found;
    if ((size_t)(self->count + 1) * 2 > self->index_mask + 1 && state_grow_index(self) < 0) return NULL;
    if (self->count == self->capacity) {
        Py_ssize_t capacity = self->capacity ? self->capacity * 2 : 256;
        Symbol *symbols = PyMem_Realloc(self->symbols, (size_t)capacity * sizeof(Symbol));
        if (symbols == NULL) {
            PyErr_NoMemory();
            return NULL;
        }
        self->symbols = symbols;
        self->capacity = capacity;
    }
    char *copy = PyMem_Malloc((size_t)len + 1);
    if (copy == NULL) {
        PyErr_NoMemory();
        return NULL;
    }
    memcpy(copy, key, (size_t)len);
    copy[len] = 0;
    Symbol *s = &self->symbols[self->count++];
    memset(s, 0, sizeof *s);
    s->key = copy;
    s->len = len;
    s->slot_hash = hash;
    size_t slot = hash & self->index_mask;
    while (self->index[slot]) slot = (slot + 1) & self->index_mask;
    self->index[slot] = (uint32_t)self->count;
    return s;
}

static void state_clear(StateObject *self) {
    for (Py_ssize_t i = 0; i < self->count; i++) PyMem_Free(self->symbols[i].key);
    self->count = 0;
    if (self->index_mask) memset(self->index, 0, (self->index_mask + 1) * sizeof(uint32_t));
    self->digest = self->salt;
}

/* One entry applied to a symbol's values, exactly as ConversionState.apply does. */
static inline int apply_entry(Values *v, int type, double price, int64_t size, double notional) {
    if (type == FH_ENTRYTYPE_TRADE) {
        if (v->trade_count == 0) {
            v->high = v->low = price;
        } else if (price > v->high) {
            v->high = price;
        } else if (price < v->low) {
            v->low = price;
        }
        v->last = price;
        if (__builtin_add_overflow(v->volume, size, &v->volume)) return -1;
        v->notional += notional;
        v->trade_count += 1;
        return 1;
    }
    if (type == FH_ENTRYTYPE_BID) {
        v->bid = price;
    } else if (type == FH_ENTRYTYPE_ASK) {
        v->ask = price;
    }
    return 0;
}

static inline void finish_apply(Values *v, int traded) {
    if (traded) v->vwap = v->volume ? v->notional / (double)v->volume : 0.0;
}

static int rehash(StateObject *self, Symbol *s) {
    uint64_t h = symbol_hash(s->key, s->len, &s->v);
    if (PyErr_Occurred()) return -1;
    self->digest = self->digest - s->hash + h;
    s->hash = h;
    return 0;
}

static PyObject *values_tuple(const Values *v) {
    return Py_BuildValue("(LddddLddd)", (long long)v->volume, v->high, v->low, v->last, v->vwap,
                         (long long)v->trade_count, v->bid, v->ask, v->notional);
}

static int values_from(PyObject *seq, Values *v) {
    long long volume, trade_count;
    if (!PyArg_ParseTuple(seq, "LddddLddd", &volume, &v->high, &v->low, &v->last, &v->vwap, &trade_count,
                          &v->bid, &v->ask, &v->notional))
        return -1;
    v->volume = volume;
    v->trade_count = trade_count;
    return 0;
}

static const char *symbol_utf8(PyObject *symbol, Py_ssize_t *len) {
    if (!PyUnicode_Check(symbol)) {
        PyErr_Format(PyExc_TypeError, "symbol must be str, got %.80s", Py_TYPE(symbol)->tp_name);
        return NULL;
    }
    return PyUnicode_AsUTF8AndSize(symbol, len);
}

static PyObject *State_new(PyTypeObject *type, PyObject *args, PyObject *kwds) {
    static char *kwlist[] = {NULL};
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "", kwlist)) return NULL;
    StateObject *self = (StateObject *)type->tp_alloc(type, 0);
    if (self != NULL) self->max_symbols = PY_SSIZE_T_MAX;
    return (PyObject *)self;
}

static void State_dealloc(StateObject *self) {
    state_clear(self);
    PyMem_Free(self->symbols);
    PyMem_Free(self->index);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

PyDoc_STRVAR(State_apply_doc,
             "apply(symbol, entries) -> values tuple\n\n"
             "Apply ``(entry_type, price, size, notional)`` entries to a symbol; return its 9 values after.");

static PyObject *State_apply(StateObject *self, PyObject *args) {
    PyObject *symbol, *entries;
    if (!PyArg_ParseTuple(args, "UO", &symbol, &entries)) return NULL;
    Py_ssize_t len;
    const char *key = symbol_utf8(symbol, &len);
    if (key == NULL) return NULL;
    PyObject *fast = PySequence_Fast(entries, "entries must be a sequence");
    if (fast == NULL) return NULL;
    Symbol *s = state_get(self, key, len);
    if (s == NULL) {
        Py_DECREF(fast);
        return NULL;
    }
    int traded = 0;
    for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(fast); i++) {
        int type;
        double price, notional;
        long long size;
        if (!PyArg_ParseTuple(PySequence_Fast_GET_ITEM(fast, i), "idLd", &type, &price, &size, &notional)) {
            Py_DECREF(fast);
            return NULL;
        }
        int r = apply_entry(&s->v, type, price, size, notional);
        if (r < 0) {
            Py_DECREF(fast);
            return PyErr_Format(PyExc_OverflowError, "volume of %s overflows int64", s->key);
        }
        traded |= r;
    }
    Py_DECREF(fast);
    finish_apply(&s->v, traded);
    if (rehash(self, s) < 0) return NULL;
    return values_tuple(&s->v);
}

/* The symbol a Python str names: 1 found (*out set), 0 unknown, -1 error (not a str). */
static int state_lookup(StateObject *self, PyObject *symbol, Symbol **out) {
    Py_ssize_t len;
    const char *key = symbol_utf8(symbol, &len);
    if (key == NULL) return -1;
    *out = state_find(self, key, len, sip_bytes(key, (size_t)len));
    return *out != NULL;
}

static PyObject *State_get(StateObject *self, PyObject *symbol) {
    Symbol *s;
    int found = state_lookup(self, symbol, &s);
    if (found < 0) return NULL;
    if (!found) Py_RETURN_NONE;
    return values_tuple(&s->v);
}

static PyObject *State_symbol_hash(StateObject *self, PyObject *symbol) {
    Symbol *s;
    int found = state_lookup(self, symbol, &s);
    if (found < 0) return NULL;
    if (!found) Py_RETURN_NONE;
    return PyLong_FromUnsignedLongLong(s->hash);
}

static PyObject *State_set(StateObject *self, PyObject *args) {
    PyObject *symbol, *values;
    if (!PyArg_ParseTuple(args, "UO!", &symbol, &PyTuple_Type, &values)) return NULL;
    Values v;
    if (values_from(values, &v) < 0) return NULL;
    Py_ssize_t len;
    const char *key = symbol_utf8(symbol, &len);
    if (key == NULL) return NULL;
    Symbol *s = state_get(self, key, len);
    if (s == NULL) return NULL;
    s->v = v;
    if (rehash(self, s) < 0) return NULL;
    Py_RETURN_NONE;
}

static PyObject *State_items(StateObject *self, PyObject *Py_UNUSED(ignored)) {
    PyObject *list = PyList_New(self->count);
    if (list == NULL) return NULL;
    for (Py_ssize_t i = 0; i < self->count; i++) {
        Symbol *s = &self->symbols[i];
        PyObject *item = Py_BuildValue("(s#N)", s->key, s->len, values_tuple(&s->v));
        if (item == NULL) {
            Py_DECREF(list);
            return NULL;
        }
        PyList_SET_ITEM(list, i, item);
    }
    return list;
}

static PyObject *State_clear(StateObject *self, PyObject *Py_UNUSED(ignored)) {
    state_clear(self);
    Py_RETURN_NONE;
}

static PyObject *State_get_digest(StateObject *self, void *Py_UNUSED(closure)) {
    return PyLong_FromUnsignedLongLong(self->digest);
}

static PyObject *State_get_salt(StateObject *self, void *Py_UNUSED(closure)) {
    return PyLong_FromUnsignedLongLong(self->salt);
}

/* The session's share of the digest: the digest moves by the difference (O(1)). */
static int State_set_salt(StateObject *self, PyObject *value, void *Py_UNUSED(closure)) {
    if (value == NULL) {
        PyErr_SetString(PyExc_TypeError, "salt cannot be deleted");
        return -1;
    }
    unsigned long long salt = PyLong_AsUnsignedLongLong(value);
    if (salt == (unsigned long long)-1 && PyErr_Occurred()) return -1;
    self->digest = self->digest - self->salt + (uint64_t)salt;
    self->salt = (uint64_t)salt;
    return 0;
}

static PyObject *State_get_max_symbols(StateObject *self, void *Py_UNUSED(closure)) {
    return PyLong_FromSsize_t(self->max_symbols);
}

static int State_set_max_symbols(StateObject *self, PyObject *value, void *Py_UNUSED(closure)) {
    if (value == NULL) {
        PyErr_SetString(PyExc_TypeError, "max_symbols cannot be deleted");
        return -1;
    }
    Py_ssize_t max_symbols = PyLong_AsSsize_t(value);
    if (max_symbols == -1 && PyErr_Occurred()) return -1;
    if (max_symbols < 1) {
        PyErr_SetString(PyExc_ValueError, "max_symbols must be at least 1");
        return -1;
    }
    self->max_symbols = max_symbols;
    return 0;
}

static Py_ssize_t State_len(StateObject *self) { return self->count; }

static int State_contains(StateObject *self, PyObject *symbol) {
    if (!PyUnicode_Check(symbol)) return 0; /* `in` answers False for a non-str, as a dict would */
    Symbol *s;
    return state_lookup(self, symbol, &s);
}

static PyMethodDef State_methods[] = {
    {"apply", (PyCFunction)State_apply, METH_VARARGS, State_apply_doc},
    {"get", (PyCFunction)State_get, METH_O, "get(symbol) -> values tuple or None"},
    {"symbol_hash", (PyCFunction)State_symbol_hash, METH_O, "symbol_hash(symbol) -> its u64 share of the digest, or None"},
    {"set", (PyCFunction)State_set, METH_VARARGS, "set(symbol, values tuple): adopt a symbol's values"},
    {"items", (PyCFunction)State_items, METH_NOARGS, "items() -> [(symbol, values tuple)] in first-seen order"},
    {"clear", (PyCFunction)State_clear, METH_NOARGS, "clear(): forget every symbol"},
    {NULL, NULL, 0, NULL},
};

static PyObject *State_get_probes(StateObject *self, void *Py_UNUSED(closure)) {
    return PyLong_FromUnsignedLongLong(self->probes);
}

static PyGetSetDef State_getset[] = {
    {"digest", (getter)State_get_digest, NULL, "u64 sum of the symbols' hashes and the salt", NULL},
    {"salt", (getter)State_get_salt, (setter)State_set_salt, "u64 added to the digest (the session's share)", NULL},
    {"max_symbols", (getter)State_get_max_symbols, (setter)State_set_max_symbols,
     "a run stops at a message naming a new symbol when this many are held", NULL},
    {"probes", (getter)State_get_probes, NULL, "index slots looked at so far by lookups (for tests)", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PySequenceMethods State_as_sequence = {
    .sq_length = (lenfunc)State_len,
    .sq_contains = (objobjproc)State_contains,
};

static PyTypeObject StateType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "feedha.adapter.formats.feedha_fix._fastpath.State",
    .tp_basicsize = sizeof(StateObject),
    .tp_dealloc = (destructor)State_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "The conversion state: per-symbol values and the order-independent digest (see adapter/state.py).",
    .tp_new = State_new,
    .tp_methods = State_methods,
    .tp_getset = State_getset,
    .tp_as_sequence = &State_as_sequence,
};

/* ---- output buffer: Buf, put_varint, varint_size, put_double (_protowire.h) ---- */

/* ---- the fast path ---- */

/* ENV_FIXED, MAX_EXTRAS, MAX_PAYLOAD, BLOCK_OVERHEAD, OP_*, TIME_*, PRICE_* and STOP_* come
 * from _fastpath_constants.h. The environment: the ENV_FIXED inputs (bid, ask, trade_price,
 * trade_size, trade_notional), then one slot per extra. */
#define MAX_ENTRIES 64 /* entry groups of one message; more go to the Python path */

typedef struct {
    char name[64];
    Py_ssize_t name_len;
    int op, a, b; /* env slots of the two arguments */
} Extra;

typedef struct {
    PyObject_HEAD
    StateObject *state;
    char msg_type[16];
    Py_ssize_t msg_type_len;
    long seq_tag, symbol_tag, time_tag, count_tag, start_tag, type_tag, price_tag, size_tag;
    int time_kind, price_kind;
    char type_codes[8][8]; /* wire value of each entry type code */
    Py_ssize_t type_code_len[8];
    int type_values[8];
    int type_count;
    int notional_kind;      /* 0: none, 1: price * size */
    unsigned notional_mask; /* entry types (bit per type value) it applies to */
    Extra extras[MAX_EXTRAS];
    int extra_count;
    int extra_order[MAX_EXTRAS]; /* extras sorted by name: the map's deterministic order */
    int fsum_negative_zero;      /* math.fsum((-0.0, -0.0)) is -0.0 on this Python */
} FastPathObject;

typedef struct {
    int type;
    double price;
    int64_t size;
    double notional;
} Entry;

typedef struct {
    uint64_t source_seq;
    const char *symbol;
    Py_ssize_t symbol_len;
    int64_t event_time_ns;
    Entry entries[MAX_ENTRIES];
    int entry_count;
    double extra_values[MAX_EXTRAS];
    int extra_present[MAX_EXTRAS];
} Message;

/* A canonical non-negative decimal: digits only, 1..18 of them (fits int64). */
static int parse_uint(const char *p, Py_ssize_t n, int64_t *out) {
    if (n <= 0 || n > 18) return -1;
    int64_t v = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        if (p[i] < '0' || p[i] > '9') return -1;
        v = v * 10 + (p[i] - '0');
    }
    *out = v;
    return 0;
}

/* to_int: an optional '-' and digits (within int64 by construction). */
static int parse_int(const char *p, Py_ssize_t n, int64_t *out) {
    if (n > 0 && p[0] == '-') {
        if (parse_uint(p + 1, n - 1, out) < 0) return -1;
        *out = -*out;
        return 0;
    }
    return parse_uint(p, n, out);
}

static const double POW10[] = {1e0,  1e1,  1e2,  1e3,  1e4,  1e5,  1e6,  1e7,  1e8,  1e9,  1e10, 1e11,
                               1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};

/* to_double for plain decimals "-?digits(.digits)?", correctly rounded like Python's float(). */
static int parse_double(const char *p, Py_ssize_t n, double *out) {
    Py_ssize_t i = 0;
    int negative = 0;
    if (n > 0 && p[0] == '-') {
        negative = 1;
        i = 1;
    }
    uint64_t mantissa = 0;
    int digits = 0, frac = 0, dot = 0, int_digits = 0;
    for (; i < n; i++) {
        char c = p[i];
        if (c >= '0' && c <= '9') {
            if (digits < 19) mantissa = mantissa * 10 + (uint64_t)(c - '0');
            digits++;
            if (dot) frac++; else int_digits++;
        } else if (c == '.' && !dot) {
            dot = 1;
        } else {
            return -1;
        }
    }
    if (int_digits == 0 || (dot && frac == 0)) return -1; /* ".5", "5." : leave them to Python */
    double v;
    if (digits <= 15 && frac <= 22) {
        /* Both operands are exact doubles, so one division is correctly rounded. */
        v = (double)mantissa / POW10[frac];
    } else {
        char tmp[64];
        if (n >= (Py_ssize_t)sizeof tmp) return -1;
        memcpy(tmp, p, (size_t)n);
        tmp[n] = 0;
        v = strtod(tmp, NULL);
        if (!isfinite(v)) return -1;
        *out = v;
        return 0;
    }
    *out = negative ? -v : v;
    return 0;
}

static int64_t days_from_civil(int64_t y, int64_t m, int64_t d) {
    y -= m <= 2;
    int64_t era = (y >= 0 ? y : y - 399) / 400;
    int64_t yoe = y - era * 400;
    int64_t doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
    int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    return era * 146097 + doe - 719468;
}

/* proto.fix.parse_timestamp for "YYYYMMDD-HH:MM:SS[.f{1,9}]" with a valid year and month. */
static int parse_fix_time(const char *p, Py_ssize_t n, int64_t *out) {
    int64_t year, month, day, hh, mm, ss;
    if (n < 17 || p[8] != '-' || p[11] != ':' || p[14] != ':') return -1;
    if (parse_uint(p, 4, &year) || parse_uint(p + 4, 2, &month) || parse_uint(p + 6, 2, &day) ||
        parse_uint(p + 9, 2, &hh) || parse_uint(p + 12, 2, &mm) || parse_uint(p + 15, 2, &ss))
        return -1;
    /* ns stay within int64 (from 1677-09-21 on): earlier years go to the Python path, which refuses them */
    if (year < 1678 || year > 2200 || month < 1 || month > 12) return -1;
    /* calendar.timegm counts days linearly from the first of the month. */
    int64_t days = days_from_civil(year, month, 1) + day - 1;
    int64_t ns = (days * 86400 + hh * 3600 + mm * 60 + ss) * 1000000000LL;
    if (n > 17) {
        int64_t frac;
        Py_ssize_t digits = n - 18;
        if (p[17] != '.' || digits < 1 || digits > 9 || parse_uint(p + 18, digits, &frac)) return -1;
        for (Py_ssize_t i = digits; i < 9; i++) frac *= 10;
        ns += frac;
    }
    *out = ns;
    return 0;
}

/* math.fsum((a, b)): a + b (both correctly rounded), except the sign of a zero sum,
 * which fsum makes +0.0 -- or -0.0 for -0.0 + -0.0 on Pythons where it says so (spec). */
static inline double fsum2(const FastPathObject *fp, double a, double b) {
    double r = a + b;
    if (r == 0.0) r = (fp->fsum_negative_zero && signbit(a) && signbit(b)) ? -0.0 : 0.0;
    return r;
}

/*
 * ---- convert(): one message body -> Message ----
 *
 * Every helper returns -1 for "the Python path must take this message"
 * (anything unusual: the Python path then decides what it is). They are
 * static inline: convert() runs once per message.
 */

/* Header fields seen so far (each may appear once, all must). */
enum { SEEN_MSG_TYPE = 1, SEEN_SEQ = 2, SEEN_SYMBOL = 4, SEEN_TIME = 8, SEEN_COUNT = 16, SEEN_HEADER = 31 };
/* Fields of the current entry seen so far (each once, all three). */
enum { SEEN_TYPE = 1, SEEN_PRICE = 2, SEEN_SIZE = 4, SEEN_ENTRY = 7 };

/* The "tag=value" field at *p (before end), up to the next SOH or end: 1 found, 0 an empty
 * field, -1 a tag that is not canonical (leading zero, over 9 digits, not a number). Moves
 * *p past the field's SOH (for the last field, one past end: the frame's trailer follows
 * the body, so that is still inside the frame). */
static inline int next_field(const char **p, const char *end, long *tag, const char **value, Py_ssize_t *value_len) {
    const char *start = *p;
    const char *soh = memchr(start, 1, (size_t)(end - start));
    if (soh == NULL) soh = end;
    *p = soh + 1;
    if (soh == start) return 0;
    const char *eq = memchr(start, '=', (size_t)(soh - start));
    if (eq == NULL || eq == start || eq - start > 9 || start[0] == '0') return -1;
    long t = 0;
    for (const char *q = start; q < eq; q++) {
        if (*q < '0' || *q > '9') return -1;
        t = t * 10 + (*q - '0');
    }
    *tag = t;
    *value = eq + 1;
    *value_len = soh - (eq + 1);
    return 1;
}

/* A symbol the fast path takes: 1..255 printable ASCII bytes, no space (others go to Python). */
static inline int is_plain_symbol(const char *v, Py_ssize_t vn) {
    if (vn <= 0 || vn > 255) return 0;
    for (Py_ssize_t i = 0; i < vn; i++)
        if ((unsigned char)v[i] < 0x21 || (unsigned char)v[i] > 0x7E) return 0;
    return 1;
}

/* One field before the first entry; tags the table does not name are ignored. */
static inline int header_field(const FastPathObject *fp, Message *m, long tag, const char *v, Py_ssize_t vn,
                               unsigned *seen, int64_t *count) {
    unsigned bit;
    if (tag == 35) {
        if (vn != fp->msg_type_len || memcmp(v, fp->msg_type, (size_t)vn)) return -1;
        bit = SEEN_MSG_TYPE;
    } else if (tag == fp->seq_tag) {
        int64_t seq;
        if (parse_uint(v, vn, &seq) || seq <= 0) return -1;
        m->source_seq = (uint64_t)seq;
        bit = SEEN_SEQ;
    } else if (tag == fp->symbol_tag) {
        if (!is_plain_symbol(v, vn)) return -1;
        m->symbol = v;
        m->symbol_len = vn;
        bit = SEEN_SYMBOL;
    } else if (tag == fp->time_tag) {
        if (fp->time_kind == TIME_FIX ? parse_fix_time(v, vn, &m->event_time_ns) : parse_int(v, vn, &m->event_time_ns))
            return -1;
        bit = SEEN_TIME;
    } else if (tag == fp->count_tag) {
        if (parse_uint(v, vn, count)) return -1;
        bit = SEEN_COUNT;
    } else {
        return 0;
    }
    if (*seen & bit) return -1; /* a duplicate: the Python path decides */
    *seen |= bit;
    return 0;
}

/* The EntryType value of an entry type code the table lists. */
static inline int entry_type_value(const FastPathObject *fp, const char *v, Py_ssize_t vn) {
    for (int t = 0; t < fp->type_count; t++)
        if (fp->type_code_len[t] == vn && memcmp(fp->type_codes[t], v, (size_t)vn) == 0) return fp->type_values[t];
    return -1;
}

/* A price as the table converts it: to_double, or to_int within the doubles' exact integers. */
static inline int parse_price(const FastPathObject *fp, const char *v, Py_ssize_t vn, double *out) {
    if (fp->price_kind == PRICE_DOUBLE) return parse_double(v, vn, out);
    int64_t iv;
    if (parse_int(v, vn, &iv) || iv > (1LL << 53) || iv < -(1LL << 53)) return -1;
    *out = (double)iv;
    return 0;
}

/* One field of the current entry; other tags are ignored. */
static inline int entry_field(const FastPathObject *fp, Entry *e, long tag, const char *v, Py_ssize_t vn,
                              unsigned *seen) {
    unsigned bit;
    if (tag == fp->type_tag) {
        if ((e->type = entry_type_value(fp, v, vn)) < 0) return -1;
        bit = SEEN_TYPE;
    } else if (tag == fp->price_tag) {
        if (parse_price(fp, v, vn, &e->price)) return -1;
        bit = SEEN_PRICE;
    } else if (tag == fp->size_tag) {
        if (parse_int(v, vn, &e->size) || e->size < 0) return -1;
        bit = SEEN_SIZE;
    } else {
        return 0;
    }
    if (*seen & bit) return -1;
    *seen |= bit;
    return 0;
}

/* The fields of a body into m: the header, then entries each opened by start_tag. */
static inline int parse_body(const FastPathObject *fp, const char *body, Py_ssize_t n, Message *m) {
    unsigned seen = 0, entry_seen = 0;
    int64_t count = -1;
    int groups = 0;
    Entry *e = NULL;
    const char *p = body, *end = body + n, *v;
    long tag;
    Py_ssize_t vn;
    while (p < end) {
        int found = next_field(&p, end, &tag, &v, &vn);
        if (found <= 0) {
            if (found < 0) return -1;
            continue;
        }
        if (tag == fp->start_tag) {
            if ((e != NULL && entry_seen != SEEN_ENTRY) || groups == MAX_ENTRIES) return -1;
            e = &m->entries[groups++];
            entry_seen = 0;
        }
        if (e == NULL ? header_field(fp, m, tag, v, vn, &seen, &count) : entry_field(fp, e, tag, v, vn, &entry_seen))
            return -1;
    }
    if (seen != SEEN_HEADER || (e != NULL && entry_seen != SEEN_ENTRY) || count != groups) return -1;
    m->entry_count = groups;
    return 0;
}

/* Each entry's notional, and the fixed inputs of the extras (bid, ask, trade price, size
 * and notional), as Converter._parse_fast computes them. */
static inline int derive_entries(const FastPathObject *fp, Message *m, double *env, int *present) {
    int64_t trade_size = 0;
    double trade_notional = 0.0;
    for (int i = 0; i < m->entry_count; i++) {
        Entry *x = &m->entries[i];
        x->notional = fp->notional_kind && (fp->notional_mask & (1u << x->type)) ? x->price * (double)x->size : 0.0;
        if (x->type == FH_ENTRYTYPE_TRADE) {
            env[2] = x->price;
            present[2] = 1;
            if (__builtin_add_overflow(trade_size, x->size, &trade_size)) return -1;
            trade_notional += x->notional;
        } else if (x->type == FH_ENTRYTYPE_BID) {
            env[0] = x->price;
            present[0] = 1;
        } else if (x->type == FH_ENTRYTYPE_ASK) {
            env[1] = x->price;
            present[1] = 1;
        }
        if ((double)x->size > 9007199254740992.0 && fp->notional_kind) return -1; /* int*float rounding */
    }
    if (present[2]) {
        env[3] = (double)trade_size;
        env[4] = trade_notional;
        present[3] = present[4] = 1;
    }
    return 0;
}

/* One extra rule's operation: 1 with *out, 0 when it yields nothing (division by zero). */
static inline int extra_op(const FastPathObject *fp, int op, double a, double b, double *out) {
    switch (op) {
    case OP_ADD: *out = fsum2(fp, a, b); break;
    case OP_SUB: *out = a - b; break;
    case OP_MUL: *out = a * b; break;
    case OP_DIV:
        if (b == 0.0) return 0;
        *out = a / b;
        break;
    case OP_MEAN: *out = fsum2(fp, a, b) / 2.0; break;
    case OP_MIN: *out = b < a ? b : a; break;
    default: *out = b > a ? b : a; break;
    }
    return 1;
}

/* The extras in table order (each may read the fixed inputs and the extras before it), as
 * Converter._extras computes them; an extra whose inputs are absent is absent. */
static inline int derive_extras(const FastPathObject *fp, Message *m, double *env, int *present) {
    for (int i = 0; i < fp->extra_count; i++) {
        const Extra *x = &fp->extras[i];
        double r;
        m->extra_present[i] = 0;
        if (!present[x->a] || !present[x->b] || !extra_op(fp, x->op, env[x->a], env[x->b], &r)) continue;
        if (!isfinite(r)) return -1; /* overflow: Python raises or differs; let it decide */
        env[ENV_FIXED + i] = r;
        present[ENV_FIXED + i] = 1;
        m->extra_values[i] = r;
        m->extra_present[i] = 1;
    }
    return 0;
}

/* Parse and convert one message body; 0 on success, -1 when the Python path must take it. */
static int convert(const FastPathObject *fp, const char *body, Py_ssize_t n, Message *m) {
    if (parse_body(fp, body, n, m) < 0) return -1;
    double env[ENV_FIXED + MAX_EXTRAS];
    int present[ENV_FIXED + MAX_EXTRAS] = {0};
    if (derive_entries(fp, m, env, present) < 0 || derive_extras(fp, m, env, present) < 0) return -1;
    for (int i = 0; i < m->entry_count; i++)
        if (!isfinite(m->entries[i].notional)) return -1;
    return 0;
}

/* FIX framing from ``pos`` as proto.fix._next_message; -1 where Python must look. */
static int next_message(const char *buf, Py_ssize_t end, Py_ssize_t pos, Py_ssize_t *body_start,
                        Py_ssize_t *body_end, Py_ssize_t *next) {
    if (end - pos < 5 || memcmp(buf + pos, "8=FIX", 5) != 0) return -1;
    const char *soh = memchr(buf + pos, 1, (size_t)(end - pos));
    if (soh == NULL) return -1;
    Py_ssize_t s = soh - buf;
    if (s + 3 > end || buf[s + 1] != '9' || buf[s + 2] != '=') return -1;
    const char *len_end_p = memchr(buf + s + 3, 1, (size_t)(end - s - 3));
    if (len_end_p == NULL) return -1;
    Py_ssize_t len_end = len_end_p - buf;
    if (len_end - s > 8) return -1;
    int64_t body_len;
    if (parse_uint(buf + s + 3, len_end - s - 3, &body_len) || body_len <= 0) return -1;
    Py_ssize_t bs = len_end + 1, be = bs + (Py_ssize_t)body_len, trailer_end = be + 7;
    if (trailer_end > end || memcmp(buf + be, "10=", 3) != 0 || buf[trailer_end - 1] != 1) return -1;
    int64_t declared;
    if (parse_uint(buf + be + 3, 3, &declared)) return -1;
    if ((int64_t)fix_byte_sum((const uint8_t *)buf + pos, (size_t)(be - pos)) != declared) return -1;
    *body_start = bs;
    *body_end = be;
    *next = trailer_end;
    return 0;
}

/*
 * ---- encode_update(): Message + values -> MarketUpdate bytes ----
 *
 * SerializeToString(deterministic=True) of conversion.encode_update's message:
 * fields in number order, proto3 scalars omitted when zero (doubles when their
 * bits are: -0.0 is written), the map sorted by key. The sizes below count one
 * byte per tag, which gen_proto.py guarantees (field numbers 1..15).
 */

/* An int64/enum field, omitted when zero. */
static inline size_t varint_field_size(uint64_t v) { return v ? 1 + varint_size(v) : 0; }

static inline uint8_t *put_varint_field(uint8_t *p, uint8_t tag, uint64_t v) {
    if (v) {
        *p++ = tag;
        p = put_varint(p, v);
    }
    return p;
}

/* A double field, omitted when its bits are zero. */
static inline size_t double_field_size(double d) { return dbits(d) ? 9 : 0; }

static inline uint8_t *put_double_field(uint8_t *p, uint8_t tag, double d) {
    if (dbits(d)) {
        *p++ = tag;
        p = put_double(p, d);
    }
    return p;
}

/* A length-delimited field's tag and length; its content follows. */
static inline uint8_t *put_length(uint8_t *p, uint8_t tag, size_t len) {
    *p++ = tag;
    return put_varint(p, len);
}

/* One repeated Entry: its tag, length and fields. */
static inline uint8_t *put_entry(uint8_t *p, const Entry *e) {
    size_t size = varint_field_size((uint64_t)e->type) + double_field_size(e->price) +
                  varint_field_size((uint64_t)e->size) + double_field_size(e->notional);
    p = put_length(p, FH_MARKETUPDATE_ENTRIES_TAG, size);
    p = put_varint_field(p, FH_ENTRY_TYPE_TAG, (uint64_t)e->type);
    p = put_double_field(p, FH_ENTRY_PRICE_TAG, e->price);
    p = put_varint_field(p, FH_ENTRY_SIZE_TAG, (uint64_t)e->size);
    return put_double_field(p, FH_ENTRY_NOTIONAL_TAG, e->notional);
}

/* The SymbolState (always present, possibly empty). */
static inline uint8_t *put_state(uint8_t *p, const Values *v) {
    size_t size = varint_field_size((uint64_t)v->volume) + double_field_size(v->high) + double_field_size(v->low) +
                  double_field_size(v->last) + double_field_size(v->vwap) +
                  varint_field_size((uint64_t)v->trade_count) + double_field_size(v->bid) +
                  double_field_size(v->ask) + double_field_size(v->notional);
    p = put_length(p, FH_MARKETUPDATE_STATE_TAG, size);
    p = put_varint_field(p, FH_SYMBOLSTATE_VOLUME_TAG, (uint64_t)v->volume);
    p = put_double_field(p, FH_SYMBOLSTATE_HIGH_TAG, v->high);
    p = put_double_field(p, FH_SYMBOLSTATE_LOW_TAG, v->low);
    p = put_double_field(p, FH_SYMBOLSTATE_LAST_TAG, v->last);
    p = put_double_field(p, FH_SYMBOLSTATE_VWAP_TAG, v->vwap);
    p = put_varint_field(p, FH_SYMBOLSTATE_TRADE_COUNT_TAG, (uint64_t)v->trade_count);
    p = put_double_field(p, FH_SYMBOLSTATE_BID_TAG, v->bid);
    p = put_double_field(p, FH_SYMBOLSTATE_ASK_TAG, v->ask);
    return put_double_field(p, FH_SYMBOLSTATE_NOTIONAL_TAG, v->notional);
}

/* The extra map's entries that the message has, by name (the deterministic order). The
 * value is written even when zero: upb writes both fields of a map entry. */
static inline uint8_t *put_extras(uint8_t *p, const FastPathObject *fp, const Message *m) {
    for (int k = 0; k < fp->extra_count; k++) {
        int i = fp->extra_order[k];
        if (!m->extra_present[i]) continue;
        const Extra *x = &fp->extras[i];
        p = put_length(p, FH_MARKETUPDATE_EXTRA_TAG, 1 + varint_size((uint64_t)x->name_len) + (size_t)x->name_len + 9);
        p = put_length(p, FH_MARKETUPDATE_EXTRAENTRY_KEY_TAG, (size_t)x->name_len);
        memcpy(p, x->name, (size_t)x->name_len);
        p += x->name_len;
        *p++ = FH_MARKETUPDATE_EXTRAENTRY_VALUE_TAG;
        p = put_double(p, m->extra_values[i]);
    }
    return p;
}

/* The serialized MarketUpdate, appended to out. */
static inline int encode_update(const FastPathObject *fp, const Message *m, const Values *v, int64_t publish_ns,
                                Buf *out) {
    size_t need = 16 + (size_t)m->symbol_len + 24 + (size_t)m->entry_count * 40 + 100 + (size_t)fp->extra_count * 80;
    if (buf_reserve(out, need) < 0) return -1;
    uint8_t *p = put_length(out->data + out->len, FH_MARKETUPDATE_SYMBOL_TAG, (size_t)m->symbol_len);
    memcpy(p, m->symbol, (size_t)m->symbol_len);
    p += m->symbol_len;
    p = put_varint_field(p, FH_MARKETUPDATE_EVENT_TIME_NS_TAG, (uint64_t)m->event_time_ns);
    p = put_varint_field(p, FH_MARKETUPDATE_PUBLISH_TIME_NS_TAG, (uint64_t)publish_ns);
    for (int i = 0; i < m->entry_count; i++) p = put_entry(p, &m->entries[i]);
    p = put_state(p, v);
    p = put_extras(p, fp, m);
    out->len = (size_t)(p - out->data);
    return 0;
}

/*
 * ---- FastPath(state, spec): the spec adapter/formats/feedha_fix/_fastpath_spec.py's compile_spec makes ----
 *
 * Each reader takes one part of the spec dict and sets -1 + an exception
 * (ValueError naming the key, or TypeError/KeyError) when it is malformed.
 */

static long dict_long(PyObject *spec, const char *key) {
    PyObject *value = PyDict_GetItemString(spec, key); /* borrowed */
    if (value == NULL) {
        PyErr_Format(PyExc_KeyError, "fast path spec lacks %s", key);
        return -1;
    }
    return PyLong_AsLong(value);
}

/* The FIX MsgType (tag 35) value every message must carry. */
static int read_msg_type(FastPathObject *self, PyObject *spec) {
    const char *msg_type;
    Py_ssize_t msg_type_len;
    PyObject *mt = PyDict_GetItemString(spec, "msg_type");
    if (mt == NULL || PyBytes_AsStringAndSize(mt, (char **)&msg_type, &msg_type_len) < 0 ||
        msg_type_len >= (Py_ssize_t)sizeof self->msg_type) {
        if (!PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "msg_type must be bytes of at most 15");
        return -1;
    }
    memcpy(self->msg_type, msg_type, (size_t)msg_type_len);
    self->msg_type_len = msg_type_len;
    return 0;
}

/* The FIX tags of the fields the fast path reads, and how it converts them. */
static int read_tags(FastPathObject *self, PyObject *spec) {
    long *tags[] = {&self->seq_tag, &self->symbol_tag, &self->time_tag, &self->count_tag,
                    &self->start_tag, &self->type_tag, &self->price_tag, &self->size_tag};
    const char *names[] = {"seq_tag", "symbol_tag", "time_tag", "count_tag",
                           "start_tag", "type_tag", "price_tag", "size_tag"};
    for (int i = 0; i < 8; i++) {
        *tags[i] = dict_long(spec, names[i]);
        if (*tags[i] <= 0) {
            if (!PyErr_Occurred()) PyErr_Format(PyExc_ValueError, "%s must be a positive tag", names[i]);
            return -1;
        }
    }
    if ((self->time_kind = (int)dict_long(spec, "time_kind")) < 0) return -1;
    if ((self->price_kind = (int)dict_long(spec, "price_kind")) < 0) return -1;
    if ((self->notional_kind = (int)dict_long(spec, "notional_kind")) < 0) return -1;
    if ((self->fsum_negative_zero = (int)dict_long(spec, "fsum_negative_zero")) < 0) return -1;
    long mask = dict_long(spec, "notional_mask");
    if (mask < 0) return -1;
    self->notional_mask = (unsigned)mask;
    return 0;
}

/* The entry type codes: [(wire bytes, EntryType value)]. */
static int read_entry_types(FastPathObject *self, PyObject *spec) {
    PyObject *types = PyDict_GetItemString(spec, "types");
    if (types == NULL || !PyList_Check(types) || PyList_GET_SIZE(types) > 8) {
        PyErr_SetString(PyExc_ValueError, "types must be a list of at most 8 (bytes, int) pairs");
        return -1;
    }
    self->type_count = (int)PyList_GET_SIZE(types);
    for (int i = 0; i < self->type_count; i++) {
        const char *code;
        Py_ssize_t code_len;
        int value;
        if (!PyArg_ParseTuple(PyList_GET_ITEM(types, i), "y#i", &code, &code_len, &value)) return -1;
        if (code_len >= 8 || value < 0 || value > 31) {
            PyErr_SetString(PyExc_ValueError, "entry type codes must be < 8 bytes, values 0..31");
            return -1;
        }
        memcpy(self->type_codes[i], code, (size_t)code_len);
        self->type_code_len[i] = code_len;
        self->type_values[i] = value;
    }
    return 0;
}

static int extra_name_cmp(const Extra *a, const Extra *b) {
    Py_ssize_t n = a->name_len < b->name_len ? a->name_len : b->name_len;
    int c = memcmp(a->name, b->name, (size_t)n);
    if (c) return c;
    return a->name_len < b->name_len ? -1 : a->name_len > b->name_len;
}

/* extra_order: the extras sorted by name, the order the map is encoded in (insertion sort:
 * at most MAX_EXTRAS of them). */
static void sort_extras(FastPathObject *self) {
    for (int i = 1; i < self->extra_count; i++)
        for (int j = i; j > 0 && extra_name_cmp(&self->extras[self->extra_order[j - 1]],
                                                &self->extras[self->extra_order[j]]) > 0; j--) {
            int t = self->extra_order[j];
            self->extra_order[j] = self->extra_order[j - 1];
            self->extra_order[j - 1] = t;
        }
}

/* The extra rules: [(name bytes, op, env slot a, env slot b)], each reading only the fixed
 * inputs and the extras before it. */
static int read_extras(FastPathObject *self, PyObject *spec) {
    PyObject *extras = PyDict_GetItemString(spec, "extras");
    if (extras == NULL || !PyList_Check(extras) || PyList_GET_SIZE(extras) > MAX_EXTRAS) {
        PyErr_Format(PyExc_ValueError, "extras must be a list of at most %d rules", MAX_EXTRAS);
        return -1;
    }
    self->extra_count = (int)PyList_GET_SIZE(extras);
    for (int i = 0; i < self->extra_count; i++) {
        Extra *x = &self->extras[i];
        const char *name;
        Py_ssize_t name_len;
        if (!PyArg_ParseTuple(PyList_GET_ITEM(extras, i), "y#iii", &name, &name_len, &x->op, &x->a, &x->b))
            return -1;
        if (name_len >= (Py_ssize_t)sizeof x->name || x->op < 0 || x->op >= OP_COUNT || x->a < 0 ||
            x->b < 0 || x->a >= ENV_FIXED + i || x->b >= ENV_FIXED + i) {
            PyErr_SetString(PyExc_ValueError, "bad extra rule");
            return -1;
        }
        memcpy(x->name, name, (size_t)name_len);
        x->name_len = name_len;
        self->extra_order[i] = i;
    }
    sort_extras(self);
    return 0;
}

static int FastPath_init(FastPathObject *self, PyObject *args, PyObject *kwds) {
    static char *kwlist[] = {"state", "spec", NULL};
    PyObject *state, *spec;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "O!O!", kwlist, &StateType, &state, &PyDict_Type, &spec))
        return -1;
    Py_INCREF(state);
    Py_XSETREF(self->state, (StateObject *)state);
    if (read_msg_type(self, spec) < 0 || read_tags(self, spec) < 0 || read_entry_types(self, spec) < 0 ||
        read_extras(self, spec) < 0)
        return -1;
    return 0;
}

static void FastPath_dealloc(FastPathObject *self) {
    Py_XDECREF(self->state);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

/*
 * ---- FastPath.run(): a run of messages -> wire blocks ----
 */

/* One run() call: its arguments and what it has collected so far. */
typedef struct {
    long long expect_seq; /* the source_seq the next message must carry (0: any) */
    long long stop_seq;   /* stop before this source_seq (0: never) */
    long long room;       /* bytes left in the packet */
    int empty_packet;     /* the packet was empty: its first block goes in whatever its size */
    Py_ssize_t max_count;
    long long publish_ns;
    int source_stream;
    int publish;
    Buf blocks, digests;
    PyObject *payloads; /* a list, or NULL when not asked for */
    Py_ssize_t count;
    long long first_seq;
} Run;

/* The message at pos framed and converted, if the fast path may take it: well-formed, the
 * expected source_seq and before stop_seq. -1: the Python path decides. */
static inline int take_message(const FastPathObject *self, const Run *run, const char *buf, Py_ssize_t end,
                               Py_ssize_t pos, Message *m, Py_ssize_t *next) {
    Py_ssize_t body_start, body_end;
    if (next_message(buf, end, pos, &body_start, &body_end, next) < 0 ||
        convert(self, buf + body_start, body_end - body_start, m) < 0)
        return -1;
    if (run->expect_seq && (long long)m->source_seq != run->expect_seq) return -1;
    if (run->stop_seq && (long long)m->source_seq >= run->stop_seq) return -1;
    return 0;
}

/* The symbol's values after the message, computed on a copy: a message that stops the run
 * must leave the state alone (a symbol is added only when its first message commits, as in
 * adapter/conversion/state.py). *s: the symbol, NULL when new. -1: overflow, or a new symbol
 * past max_symbols; the Python path decides (and names it). */
static inline int apply_to_copy(StateObject *state, const Message *m, Symbol **s, Values *v) {
    *s = state_find(state, m->symbol, m->symbol_len, sip_bytes(m->symbol, (size_t)m->symbol_len));
    if (*s != NULL) {
        *v = (*s)->v;
    } else {
        if (state->count >= state->max_symbols) return -1;
        memset(v, 0, sizeof *v);
    }
    int traded = 0, overflow = 0;
    for (int i = 0; i < m->entry_count; i++) {
        const Entry *e = &m->entries[i];
        int r = apply_entry(v, e->type, e->price, e->size, e->notional);
        if (r < 0) overflow = 1;
        traded |= r > 0;
    }
    finish_apply(v, traded);
    return overflow || (v->trade_count && !isfinite(v->notional)) ? -1 : 0;
}

/* The message's wire block appended to run->blocks (and its payload to run->payloads): 0, or
 * STOP_SLOW (too big for a block) / STOP_ROOM (the packet is full) with nothing appended,
 * or -1 with an exception. The payload is encoded straight into the block after its header. */
static inline int append_block(const FastPathObject *self, Run *run, const Message *m, const Values *v) {
    size_t block_start = run->blocks.len;
    if (buf_reserve(&run->blocks, BLOCK_OVERHEAD) < 0) return -1;
    run->blocks.len += BLOCK_OVERHEAD;
    if (encode_update(self, m, v, run->publish_ns, &run->blocks) < 0) return -1;
    size_t payload_len = run->blocks.len - block_start - BLOCK_OVERHEAD;
    long long block = BLOCK_OVERHEAD + (long long)payload_len;
    if (payload_len > MAX_PAYLOAD) {
        run->blocks.len = block_start;
        return STOP_SLOW;
    }
    if (block > run->room && !(run->empty_packet && run->count == 0)) {
        run->blocks.len = block_start;
        return STOP_ROOM;
    }
    run->room -= block;
    uint8_t *b = run->blocks.data + block_start;
    put_block_header(b, payload_len, run->source_stream, m->source_seq);
    if (run->payloads != NULL) {
        PyObject *item = PyBytes_FromStringAndSize((const char *)b + BLOCK_OVERHEAD, (Py_ssize_t)payload_len);
        if (item == NULL || PyList_Append(run->payloads, item) < 0) {
            Py_XDECREF(item);
            return -1;
        }
        Py_DECREF(item);
    }
    return 0;
}

/* The message is in: its symbol takes the new values and hash, and the digest after it is
 * recorded. -1 with an exception (memory). */
static inline int commit(StateObject *state, Run *run, Symbol *s, const Message *m, const Values *v) {
    if (s == NULL && (s = state_get(state, m->symbol, m->symbol_len)) == NULL) return -1;
    s->v = *v;
    if (rehash(state, s) < 0 || buf_reserve(&run->digests, 8) < 0) return -1;
    if (run->count == 0) run->first_seq = (long long)m->source_seq;
    memcpy(run->digests.data + run->digests.len, &state->digest, 8);
    run->digests.len += 8;
    run->count++;
    run->expect_seq = (long long)m->source_seq + 1;
    return 0;
}

/* Messages from *pos until one stops the run: why it stopped (STOP_*), or -1 with an exception. */
static int run_messages(FastPathObject *self, Run *run, const char *buf, Py_ssize_t end, Py_ssize_t *pos) {
    Message m;
    while (*pos < end) {
        if (run->count >= run->max_count) return STOP_COUNT;
        Py_ssize_t next;
        Symbol *s;
        Values v;
        if (take_message(self, run, buf, end, *pos, &m, &next) < 0 || apply_to_copy(self->state, &m, &s, &v) < 0)
            return STOP_SLOW;
        if (run->publish) {
            int appended = append_block(self, run, &m, &v);
            if (appended != 0) return appended;
        }
        if (commit(self->state, run, s, &m, &v) < 0) return -1;
        *pos = next;
    }
    return STOP_END;
}

PyDoc_STRVAR(
    FastPath_run_doc,
    "run(frame, pos, expect_seq, stop_seq, room, max_count, publish_time_ns, source_stream, publish,\n"
    "    want_payloads)\n"
    "-> (pos, count, stop, blocks, first_source_seq, digests, payloads)\n\n"
    "Convert the in-order messages of ``frame`` from byte ``pos``.\n\n"
    "expect_seq: the source_seq the next message must carry (0: any, the first ever).\n"
    "stop_seq: stop before a message with source_seq >= stop_seq (0: never): a position the\n"
    "    sync rules watch (a pending report, a pending snapshot).\n"
    "room: bytes left in the current packet for blocks; a block that does not fit stops the\n"
    "    run (STOP_ROOM) unless it is the first of an empty packet (room < 0: empty packet of -room bytes).\n"
    "max_count: at most this many messages.\n"
    "publish: encode blocks (an adapter that is not publishing only converts and applies).\n"
    "want_payloads: also return each payload as bytes (for the journal).\n\n"
    "Returns the position after the last converted message, how many were converted, why it\n"
    "stopped (0 end of frame, 1 the message at pos needs the Python path, 2 packet full,\n"
    "3 max_count), the wire blocks back to back, the first message's source_seq (the others\n"
    "follow by one; 0 when count is 0), the digest after each message (native uint64s as\n"
    "bytes), and the payloads (a list, or None). Numbering is the caller's: the converted\n"
    "messages take the next ``count`` msg_seqs in order.");

static PyObject *FastPath_run(FastPathObject *self, PyObject *args) {
    Py_buffer frame;
    Py_ssize_t pos;
    int want_payloads;
    Run run = {0};
    if (!PyArg_ParseTuple(args, "y*nLLLnLipp", &frame, &pos, &run.expect_seq, &run.stop_seq, &run.room,
                          &run.max_count, &run.publish_ns, &run.source_stream, &run.publish, &want_payloads))
        return NULL;
    run.empty_packet = run.room < 0;
    if (run.empty_packet) run.room = -run.room;
    PyObject *result = NULL;
    if (pos < 0 || pos > frame.len || run.source_stream < 0 || run.source_stream > 0xFFFF) {
        PyErr_SetString(PyExc_ValueError, "pos or source_stream out of range");
        goto done;
    }
    if (want_payloads && (run.payloads = PyList_New(0)) == NULL) goto done;
    int stop = run_messages(self, &run, frame.buf, frame.len, &pos);
    if (stop < 0) goto done;
    result = Py_BuildValue("(nniy#Ly#O)", pos, run.count, stop, run.blocks.data ? (const char *)run.blocks.data : "",
                           (Py_ssize_t)run.blocks.len, run.first_seq,
                           run.digests.data ? (const char *)run.digests.data : "", (Py_ssize_t)run.digests.len,
                           run.payloads ? run.payloads : Py_None);
done:
    Py_XDECREF(run.payloads);
    PyMem_Free(run.blocks.data);
    PyMem_Free(run.digests.data);
    PyBuffer_Release(&frame);
    return result;
}

static PyObject *FastPath_get_state(FastPathObject *self, void *Py_UNUSED(closure)) {
    Py_INCREF(self->state);
    return (PyObject *)self->state;
}

static PyMethodDef FastPath_methods[] = {
    {"run", (PyCFunction)FastPath_run, METH_VARARGS, FastPath_run_doc},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef FastPath_getset[] = {
    {"state", (getter)FastPath_get_state, NULL, "the State it applies messages to", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyTypeObject FastPathType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "feedha.adapter.formats.feedha_fix._fastpath.FastPath",
    .tp_basicsize = sizeof(FastPathObject),
    .tp_dealloc = (destructor)FastPath_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "FastPath(state, spec): runs of source messages -> wire blocks (spec: _fastpath_spec.compile_spec).",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)FastPath_init,
    .tp_methods = FastPath_methods,
    .tp_getset = FastPath_getset,
};

static PyObject *py_blake2b_64(PyObject *Py_UNUSED(module), PyObject *arg) {
    Py_buffer data;
    if (PyObject_GetBuffer(arg, &data, PyBUF_SIMPLE) < 0) return NULL;
    uint64_t h = blake2b_64(data.buf, (size_t)data.len);
    PyBuffer_Release(&data);
    return PyLong_FromUnsignedLongLong(h);
}

static PyMethodDef module_methods[] = {
    {"blake2b_64", py_blake2b_64, METH_O, "blake2b_64(data) -> int.from_bytes(blake2b(data, digest_size=8).digest(), 'big')"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    .m_base = PyModuleDef_HEAD_INIT,
    .m_name = "_fastpath",
    .m_doc = "The adapter's hot path in C (see adapter/formats/feedha_fix/_native.py).",
    .m_size = -1,
    .m_methods = module_methods,
};

PyMODINIT_FUNC PyInit__fastpath(void) {
    if (PyType_Ready(&StateType) < 0 || PyType_Ready(&FastPathType) < 0 || sip_key_init() < 0) return NULL;
    PyObject *m = PyModule_Create(&module);
    if (m == NULL) return NULL;
    if (PyModule_AddObjectRef(m, "State", (PyObject *)&StateType) < 0 ||
        PyModule_AddObjectRef(m, "FastPath", (PyObject *)&FastPathType) < 0 ||
        fh_add_constants(m) < 0) { /* every shared constant: the tests tell a build from an older header */
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
