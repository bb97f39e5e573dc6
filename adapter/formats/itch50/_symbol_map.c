/*
 * itch50's SymbolMap: every symbol's values in C records. A part of the _orders extension:
 * adapter/formats/itch50/_mbo_run.c includes it (one translation unit, not compiled on its own).
 *
 * Theory of operation
 * -------------------
 * MboState keeps its symbols' values (conversion/state.py ConversionState._values) in a
 * SymbolMap where the extension is built, and their hashes (_hashes) in its HashView. A record
 * holds what a SymbolValues holds -- the nine values, the book's kind, both shown sides as
 * (price, size, orders) doubles, the session values and notional, traded, trades -- and the
 * symbol's hash. The C run (MboRun) converts a message on the record itself: it reads the
 * record, writes the block and the hash from the values after the message, and commits them
 * into the record; no Python object is made or read. Python code sees a mapping of str to
 * SymbolValues as the dict was: ``get``/``[]``/``items``/``values``/``keys``/``in``/``len``,
 * assignment. A value Python reads is built from the record when the run changed it since
 * (a new object, as the reference's copies are) and kept until the run changes it again; a
 * value Python assigns is kept as it is and read into the record. Values the record cannot
 * hold exactly (an int where a float is kept, a subclass, a level that is no (float, float,
 * int) ...) make the record not ``native``: Python's object stays the truth, and the run
 * stops at that symbol (STOP_SLOW), so the Python path's arithmetic, not the record's, moves it.
 * Keys are never removed (a restore makes a new map). Pure: no sockets, no clock.
 */

typedef struct {
    PyObject *name;     /* the key: a str */
    PyObject *obj;      /* the SymbolValues Python gave or read, or NULL: built again when asked */
    uint64_t hash;      /* the symbol's share of the digest */
    uint8_t native;     /* the record holds the values (else ``obj`` does) */
    uint8_t has_book, level_indexed;
    uint16_t session_set; /* bit i: BookValues' session value i (SESSION_NAMES) is set */
    int64_t volume, trade_count, trades;
    double high, low, last, vwap, bid, ask, notional;
    double session[9], b_notional, b_traded;
    ShownLevel *side[2]; /* bids, asks: every level the values hold */
    Py_ssize_t n_side[2], cap_side[2];
} SymRec;

typedef struct {
    PyObject_HEAD
    PyObject *where; /* name -> its record's index (an int) */
    SymRec *recs;
    Py_ssize_t n, cap;
    PyObject *values_type, *book_type;
    Py_ssize_t value_at[VALUE_SLOTS], book_at[BOOK_SLOTS];
} SymbolMapObject;

static PyTypeObject SymbolMapType;

static void rec_free(SymRec *r) {
    Py_CLEAR(r->name);
    Py_CLEAR(r->obj);
    for (int k = 0; k < 2; k++) PyMem_Free(r->side[k]);
}

/* Room for ``n`` levels on side ``k``: 0, or -1 with MemoryError. */
static int rec_side_room(SymRec *r, int k, Py_ssize_t n) {
    if (n <= r->cap_side[k]) return 0;
    ShownLevel *levels = PyMem_Realloc(r->side[k], (size_t)n * sizeof(ShownLevel));
    if (levels == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    r->side[k] = levels;
    r->cap_side[k] = n;
    return 0;
}

/* The record of ``name``, or NULL (no exception: a str key looked up in a dict of str keys). */
static SymRec *map_find(SymbolMapObject *m, PyObject *name) {
    PyObject *at = PyDict_GetItemWithError(m->where, name);
    if (at == NULL) return NULL;
    Py_ssize_t i = PyLong_AsSsize_t(at);
    return (i >= 0 && i < m->n) ? &m->recs[i] : NULL;
}

/* A new, empty record for ``name`` (not native, no values: the caller fills it): NULL with an exception. */
static SymRec *map_insert(SymbolMapObject *m, PyObject *name) {
    if (m->n == m->cap) {
        Py_ssize_t cap = m->cap ? 2 * m->cap : 64;
        SymRec *recs = PyMem_Realloc(m->recs, (size_t)cap * sizeof(SymRec));
        if (recs == NULL) return (SymRec *)PyErr_NoMemory();
        m->recs = recs;
        m->cap = cap;
    }
    PyObject *at = PyLong_FromSsize_t(m->n);
    if (at == NULL || PyDict_SetItem(m->where, name, at) < 0) {
        Py_XDECREF(at);
        return NULL;
    }
    Py_DECREF(at);
    SymRec *r = &m->recs[m->n++];
    memset(r, 0, sizeof *r);
    r->name = Py_NewRef(name);
    return r;
}

/* ---- values in, values out ---- */

static int exact_i64(PyObject *o, int64_t *out) {
    if (!PyLong_CheckExact(o)) return 0;
    int overflow;
    long long v = PyLong_AsLongLongAndOverflow(o, &overflow);
    if (overflow || (v == -1 && PyErr_Occurred())) {
        PyErr_Clear();
        return 0;
    }
    *out = v;
    return 1;
}

static int exact_double(PyObject *o, double *out) {
    if (!PyFloat_CheckExact(o)) return 0;
    *out = PyFloat_AS_DOUBLE(o);
    return 1;
}

/* A shown side (a list of (float, float, int) tuples) into side ``k``: 1, 0 when it is not one, -1. */
static int side_from_list(SymRec *r, int k, PyObject *list) {
    if (!PyList_CheckExact(list)) return 0;
    Py_ssize_t n = PyList_GET_SIZE(list);
    if (rec_side_room(r, k, n) < 0) return -1;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *t = PyList_GET_ITEM(list, i);
        ShownLevel *l = &r->side[k][i];
        int64_t orders;
        if (!PyTuple_CheckExact(t) || PyTuple_GET_SIZE(t) != 3 || !exact_double(PyTuple_GET_ITEM(t, 0), &l->price) ||
            !exact_double(PyTuple_GET_ITEM(t, 1), &l->size) || !exact_i64(PyTuple_GET_ITEM(t, 2), &orders))
            return 0;
        l->orders = orders;
    }
    r->n_side[k] = n;
    return 1;
}

/* A BookValues' fields (from its slots) into the record: 1, 0 when they are not the record's types, -1. */
static int book_from_slots(SymbolMapObject *m, SymRec *r, PyObject *book) {
    PyObject *li = SLOT(book, m->book_at[0]);
    if (li != Py_True && li != Py_False) return 0;
    r->level_indexed = li == Py_True;
    for (int k = 0; k < 2; k++) {
        PyObject *side = SLOT(book, m->book_at[1 + k]);
        int rc = side == NULL ? 0 : side_from_list(r, k, side);
        if (rc <= 0) return rc;
    }
    r->session_set = 0;
    for (int i = 0; i < 9; i++) {
        PyObject *v = SLOT(book, m->book_at[3 + i]);
        if (v == Py_None) continue;
        if (v == NULL || !exact_double(v, &r->session[i])) return 0;
        r->session_set |= (uint16_t)(1u << i);
    }
    PyObject *nt = SLOT(book, m->book_at[12]), *td = SLOT(book, m->book_at[13]), *ts = SLOT(book, m->book_at[14]);
    return nt != NULL && td != NULL && ts != NULL && exact_double(nt, &r->b_notional) && exact_double(td, &r->b_traded) &&
           exact_i64(ts, &r->trades);
}

/* ``values`` read into the record (native when it holds them exactly): 0, or -1 with an exception. */
static int rec_from_values(SymbolMapObject *m, SymRec *r, PyObject *values) {
    Py_XSETREF(r->obj, Py_NewRef(values));
    r->native = 0;
    if (m->value_at[0] == 0 || !Py_IS_TYPE(values, (PyTypeObject *)m->values_type)) return 0;
    PyObject *f[10];
    for (int i = 0; i < 10; i++) {
        if ((f[i] = SLOT(values, m->value_at[i])) == NULL) return 0;
    }
    if (!exact_i64(f[0], &r->volume) || !exact_double(f[1], &r->high) || !exact_double(f[2], &r->low) ||
        !exact_double(f[3], &r->last) || !exact_double(f[4], &r->vwap) || !exact_i64(f[5], &r->trade_count) ||
        !exact_double(f[6], &r->bid) || !exact_double(f[7], &r->ask) || !exact_double(f[8], &r->notional))
        return 0;
    r->has_book = f[9] != Py_None;
    r->n_side[0] = r->n_side[1] = 0;
    if (r->has_book) {
        if (!Py_IS_TYPE(f[9], (PyTypeObject *)m->book_type)) return 0;
        int rc = book_from_slots(m, r, f[9]);
        if (rc <= 0) return rc;
    }
    r->native = 1;
    return 0;
}

static PyObject *side_list(const ShownLevel *levels, Py_ssize_t n) {
    PyObject *out = PyList_New(n);
    for (Py_ssize_t i = 0; out != NULL && i < n; i++) {
        PyObject *t = Py_BuildValue("(ddL)", levels[i].price, levels[i].size, (long long)levels[i].orders);
        if (t == NULL) Py_CLEAR(out);
        else PyList_SET_ITEM(out, i, t);
    }
    return out;
}

/* A new SymbolValues of a native record (its book a new BookValues). */
static PyObject *rec_build(SymbolMapObject *m, const SymRec *r) {
    PyObject *v[10] = {PyLong_FromLongLong(r->volume), PyFloat_FromDouble(r->high), PyFloat_FromDouble(r->low),
                       PyFloat_FromDouble(r->last), PyFloat_FromDouble(r->vwap), PyLong_FromLongLong(r->trade_count),
                       PyFloat_FromDouble(r->bid), PyFloat_FromDouble(r->ask), PyFloat_FromDouble(r->notional),
                       Py_NewRef(Py_None)};
    PyObject *k[15] = {NULL}, *out = NULL;
    if (r->has_book) {
        k[0] = Py_NewRef(r->level_indexed ? Py_True : Py_False);
        k[1] = side_list(r->side[0], r->n_side[0]);
        k[2] = side_list(r->side[1], r->n_side[1]);
        for (int i = 0; i < 9; i++)
            k[3 + i] = (r->session_set >> i) & 1 ? PyFloat_FromDouble(r->session[i]) : Py_NewRef(Py_None);
        k[12] = PyFloat_FromDouble(r->b_notional);
        k[13] = PyFloat_FromDouble(r->b_traded);
        k[14] = PyLong_FromLongLong(r->trades);
        PyObject *book_extra[3] = {PyLong_FromLong(0), PyDict_New(), PyDict_New()};
        Py_SETREF(v[9], m->value_at[0] ? build_slotted(m->book_type, m->book_at, k, 15, book_extra, 3)
                                       : PyObject_Vectorcall(m->book_type, k, 15, NULL));
        if (m->value_at[0] == 0)
            for (int i = 0; i < 3; i++) Py_XDECREF(book_extra[i]);
    }
    if (v[9] != NULL)
        out = m->value_at[0] ? build_slotted(m->values_type, m->value_at, v, 10, NULL, 0)
                             : PyObject_Vectorcall(m->values_type, v, 10, NULL);
    for (int i = 0; i < 10; i++) Py_XDECREF(v[i]);
    for (int i = 0; i < 15; i++) Py_XDECREF(k[i]);
    return out;
}

/* The values of a record as Python sees them (a new reference). */
static PyObject *rec_values(SymbolMapObject *m, SymRec *r) {
    if (r->obj == NULL && (r->obj = rec_build(m, r)) == NULL) return NULL;
    return Py_NewRef(r->obj);
}

/* ---- the digest and the wire, from a record ---- */

/* symbol_digest(name, values) of a native record (digest_view's bytes, from the doubles). */
static int rec_digest(PyObject *name, const SymRec *r, uint64_t *out) {
    Py_ssize_t len;
    const char *utf8 = PyUnicode_AsUTF8AndSize(name, &len);
    Buf b = {0};
    if (utf8 == NULL || buf_reserve(&b, (size_t)len + 1 + 72 + 1 + 24 + 81 + 24) < 0) return -1;
    memcpy(b.data, utf8, (size_t)len);
    b.data[len] = 0;
    b.len = (size_t)len + 1;
    const double d[7] = {r->high, r->low, r->last, r->vwap, r->bid, r->ask, r->notional};
    be64(&b, (uint64_t)r->volume);
    for (int i = 0; i < 4; i++) be64(&b, dbits(d[i]));
    be64(&b, (uint64_t)r->trade_count);
    for (int i = 4; i < 7; i++) be64(&b, dbits(d[i]));
    if (r->has_book) {
        b.data[b.len++] = r->level_indexed ? 'L' : 'P';
        for (int k = 0; k < 2; k++) {
            uint64_t n = (uint64_t)r->n_side[k], sum = 0;
            for (int i = 3; i >= 0; i--) b.data[b.len++] = (uint8_t)(n >> (8 * i));
            for (Py_ssize_t i = 0; i < r->n_side[k]; i++) {
                const ShownLevel *l = &r->side[k][i];
                sum += mix_order(r->level_indexed ? (uint64_t)i + 1 : 0, (uint64_t)l->orders, (uint64_t)k + 1,
                                 dbits(l->price), dbits(l->size));
            }
            be64(&b, sum);
        }
        for (int i = 0; i < 9; i++) {
            int set = (r->session_set >> i) & 1;
            b.data[b.len++] = set ? '+' : '-';
            if (set) be64(&b, dbits(r->session[i]));
        }
        be64(&b, dbits(r->b_notional));
        be64(&b, dbits(r->b_traded));
        be64(&b, (uint64_t)r->trades);
    }
    *out = blake2b_64(b.data, b.len);
    PyMem_Free(b.data);
    return 0;
}

/* SymbolState of a native record as field ``tag``: w_state_of's bytes (a block: levels cut at
 * ``limit``, Book.depth ``depth``) or a snapshot's (every level, depth 0, its live orders). */
static int w_rec_state(Buf *b, const SymRec *r, uint8_t tag, uint64_t depth, uint64_t limit, const LiveOrder *orders,
                       size_t n_orders) {
    static const uint8_t session_tags[9] = {FH_SESSIONVALUES_VOLUME_TAG, FH_SESSIONVALUES_LAST_TAG,
                                            FH_SESSIONVALUES_HIGH_TAG,   FH_SESSIONVALUES_LOW_TAG,
                                            FH_SESSIONVALUES_OPEN_TAG,   FH_SESSIONVALUES_CLOSE_TAG,
                                            FH_SESSIONVALUES_SETTLE_TAG, FH_SESSIONVALUES_OPEN_INTEREST_TAG,
                                            FH_SESSIONVALUES_VWAP_TAG};
    size_t start = b->len, book;
    if (w_varint(b, FH_SYMBOLSTATE_VOLUME_TAG, (uint64_t)r->volume) < 0 || w_double(b, FH_SYMBOLSTATE_HIGH_TAG, r->high, 0) < 0 ||
        w_double(b, FH_SYMBOLSTATE_LOW_TAG, r->low, 0) < 0 || w_double(b, FH_SYMBOLSTATE_LAST_TAG, r->last, 0) < 0 ||
        w_double(b, FH_SYMBOLSTATE_VWAP_TAG, r->vwap, 0) < 0 ||
        w_varint(b, FH_SYMBOLSTATE_TRADE_COUNT_TAG, (uint64_t)r->trade_count) < 0 ||
        w_double(b, FH_SYMBOLSTATE_BID_TAG, r->bid, 0) < 0 || w_double(b, FH_SYMBOLSTATE_ASK_TAG, r->ask, 0) < 0 ||
        w_double(b, FH_SYMBOLSTATE_NOTIONAL_TAG, r->notional, 0) < 0)
        return -1;
    book = b->len;
    if (r->has_book && w_varint(b, FH_BOOK_LEVEL_INDEXED_TAG, r->level_indexed) < 0) return -1;
    if (w_varint(b, FH_BOOK_DEPTH_TAG, depth) < 0) return -1;
    for (int k = 0; r->has_book && k < 2; k++) {
        for (Py_ssize_t i = 0; i < r->n_side[k] && (uint64_t)i < limit; i++) {
            const ShownLevel *l = &r->side[k][i];
            if (w_book_level(b, k ? FH_BOOK_ASKS_TAG : FH_BOOK_BIDS_TAG, l->price, l->size, l->orders) < 0) return -1;
        }
    }
    if (n_orders) {
        size_t at = b->len;
        for (size_t i = 0; i < n_orders; i++) {
            if (order_record(b, orders[i].ref, orders[i].side, orders[i].price, orders[i].shares) < 0) return -1;
        }
        if (w_close(b, at, FH_BOOK_ORDERS_TAG) < 0) return -1;
    }
    if (w_close(b, book, FH_SYMBOLSTATE_BOOK_TAG) < 0) return -1;
    if (r->has_book) {
        size_t session = b->len;
        for (int i = 0; i < 9; i++) {
            if (((r->session_set >> i) & 1) && w_double(b, session_tags[i], r->session[i], 1) < 0) return -1;
        }
        if (w_double(b, FH_SESSIONVALUES_NOTIONAL_TAG, r->b_notional, 0) < 0 ||
            w_double(b, FH_SESSIONVALUES_TRADED_TAG, r->b_traded, 0) < 0 ||
            w_varint(b, FH_SESSIONVALUES_TRADES_TAG, (uint64_t)r->trades) < 0 ||
            w_close(b, session, FH_SYMBOLSTATE_SESSION_TAG) < 0)
            return -1;
    }
    return w_close(b, start, tag);
}

/* ---- the mapping Python sees ---- */

static PyObject *SymbolMap_new(PyTypeObject *type, PyObject *args, PyObject *kwds) {
    static char *kwlist[] = {"values_type", "book_type", NULL};
    PyObject *values_type, *book_type;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "OO:SymbolMap", kwlist, &values_type, &book_type)) return NULL;
    SymbolMapObject *m = (SymbolMapObject *)type->tp_alloc(type, 0);
    if (m == NULL) return NULL;
    m->values_type = Py_NewRef(values_type);
    m->book_type = Py_NewRef(book_type);
    find_slots(values_type, book_type, m->value_at, m->book_at);
    if ((m->where = PyDict_New()) == NULL) Py_CLEAR(m);
    return (PyObject *)m;
}

static void SymbolMap_dealloc(SymbolMapObject *m) {
    for (Py_ssize_t i = 0; i < m->n; i++) rec_free(&m->recs[i]);
    PyMem_Free(m->recs);
    Py_XDECREF(m->where);
    Py_XDECREF(m->values_type);
    Py_XDECREF(m->book_type);
    Py_TYPE(m)->tp_free((PyObject *)m);
}

static Py_ssize_t SymbolMap_len(SymbolMapObject *m) { return m->n; }

static int SymbolMap_contains(SymbolMapObject *m, PyObject *key) { return PyDict_Contains(m->where, key); }

static PyObject *SymbolMap_subscript(SymbolMapObject *m, PyObject *key) {
    SymRec *r = map_find(m, key);
    if (r == NULL) {
        if (!PyErr_Occurred()) PyErr_SetObject(PyExc_KeyError, key);
        return NULL;
    }
    return rec_values(m, r);
}

static int SymbolMap_ass_subscript(SymbolMapObject *m, PyObject *key, PyObject *value) {
    if (value == NULL) {
        PyErr_SetString(PyExc_TypeError, "a symbol is never removed (a restore makes a new map)");
        return -1;
    }
    if (!PyUnicode_CheckExact(key)) {
        PyErr_Format(PyExc_TypeError, "a symbol is a str, not %.100s", Py_TYPE(key)->tp_name);
        return -1;
    }
    SymRec *r = map_find(m, key);
    if (r == NULL && (PyErr_Occurred() || (r = map_insert(m, key)) == NULL)) return -1;
    return rec_from_values(m, r, value);
}

static PyObject *SymbolMap_get(SymbolMapObject *m, PyObject *args) {
    PyObject *key, *fallback = Py_None;
    if (!PyArg_ParseTuple(args, "O|O:get", &key, &fallback)) return NULL;
    SymRec *r = map_find(m, key);
    if (r == NULL) return PyErr_Occurred() ? NULL : Py_NewRef(fallback);
    return rec_values(m, r);
}

/* keys (0), values (1) or items (2) as a list, in the order the symbols came. */
static PyObject *map_list(SymbolMapObject *m, int what) {
    PyObject *out = PyList_New(m->n);
    for (Py_ssize_t i = 0; out != NULL && i < m->n; i++) {
        SymRec *r = &m->recs[i];
        PyObject *item = what == 0 ? Py_NewRef(r->name) : rec_values(m, r);
        if (item != NULL && what == 2) Py_SETREF(item, PyTuple_Pack(2, r->name, item));
        if (item == NULL) Py_CLEAR(out);
        else PyList_SET_ITEM(out, i, item);
    }
    return out;
}

static PyObject *SymbolMap_keys(SymbolMapObject *m, PyObject *Py_UNUSED(i)) { return map_list(m, 0); }
static PyObject *SymbolMap_values(SymbolMapObject *m, PyObject *Py_UNUSED(i)) { return map_list(m, 1); }
static PyObject *SymbolMap_items(SymbolMapObject *m, PyObject *Py_UNUSED(i)) { return map_list(m, 2); }

static PyObject *SymbolMap_iter(SymbolMapObject *m) {
    PyObject *keys = map_list(m, 0);
    PyObject *it = keys == NULL ? NULL : PyObject_GetIter(keys);
    Py_XDECREF(keys);
    return it;
}

/* hash_of(name) -> int or None; set_hash(name, h): the HashView's two operations (MboState._hashes). */
static PyObject *SymbolMap_hash_of(SymbolMapObject *m, PyObject *key) {
    SymRec *r = map_find(m, key);
    if (r == NULL) return PyErr_Occurred() ? NULL : Py_NewRef(Py_None);
    return PyLong_FromUnsignedLongLong(r->hash);
}

static PyObject *SymbolMap_set_hash(SymbolMapObject *m, PyObject *args) {
    PyObject *key;
    unsigned long long h;
    if (!PyArg_ParseTuple(args, "OK:set_hash", &key, &h)) return NULL;
    SymRec *r = map_find(m, key);
    if (r == NULL) {
        if (!PyErr_Occurred()) PyErr_SetObject(PyExc_KeyError, key);
        return NULL;
    }
    r->hash = h;
    Py_RETURN_NONE;
}

static PyObject *SymbolMap_native_count(SymbolMapObject *m, PyObject *Py_UNUSED(i)) {
    Py_ssize_t n = 0;
    for (Py_ssize_t i = 0; i < m->n; i++) n += m->recs[i].native;
    return PyLong_FromSsize_t(n);
}

static PyMethodDef SymbolMap_methods[] = {
    {"get", (PyCFunction)SymbolMap_get, METH_VARARGS, "get(symbol, default=None): its SymbolValues"},
    {"keys", (PyCFunction)SymbolMap_keys, METH_NOARGS, "the symbols, in the order they came"},
    {"values", (PyCFunction)SymbolMap_values, METH_NOARGS, "their SymbolValues"},
    {"items", (PyCFunction)SymbolMap_items, METH_NOARGS, "(symbol, SymbolValues) pairs"},
    {"hash_of", (PyCFunction)SymbolMap_hash_of, METH_O, "hash_of(symbol): its share of the digest, or None"},
    {"set_hash", (PyCFunction)SymbolMap_set_hash, METH_VARARGS, "set_hash(symbol, hash)"},
    {"native_count", (PyCFunction)SymbolMap_native_count, METH_NOARGS, "how many records hold their values"},
    {NULL, NULL, 0, NULL},
};

static PyMappingMethods SymbolMap_as_mapping = {
    .mp_length = (lenfunc)SymbolMap_len,
    .mp_subscript = (binaryfunc)SymbolMap_subscript,
    .mp_ass_subscript = (objobjargproc)SymbolMap_ass_subscript,
};

static PySequenceMethods SymbolMap_as_sequence = {.sq_contains = (objobjproc)SymbolMap_contains};

static PyTypeObject SymbolMapType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "feedha.adapter.conversion._orders.SymbolMap",
    .tp_basicsize = sizeof(SymbolMapObject),
    .tp_dealloc = (destructor)SymbolMap_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "SymbolMap(values_type, book_type): itch50 symbols' values in C records, as a mapping.",
    .tp_new = SymbolMap_new,
    .tp_methods = SymbolMap_methods,
    .tp_as_mapping = &SymbolMap_as_mapping,
    .tp_as_sequence = &SymbolMap_as_sequence,
    .tp_iter = (getiterfunc)SymbolMap_iter,
};
