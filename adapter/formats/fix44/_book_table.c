/*
 * fix44's BookTable and SideView: a part of the _orders extension. adapter/conversion/_orders.c
 * includes it after what the formats share (one translation unit: it is not compiled on its own).
 */

/* ---- BookTable: fix44's conversion state in C structs ----
 *
 * BookTable() is the state fix44_engine.BookState keeps in Python objects, kept here as
 * _fastpath's State keeps feedha-fix's (adapter/formats/fix44/_native_books.py wraps it with
 * BookState's interface and builds SymbolValues and BookValues only when Python asks). Per
 * symbol one record (FxBook): SymbolValues' nine values, the book's kind, session values
 * (each set or not: None), notional, traded and trades, and both sides of (price, size,
 * orders), best first (_level_tree.h: a sorted array up to 64 levels, a tree past that; a
 * price found, inserted or deleted and a level-indexed position reached in O(log n)). Each
 * side also keeps its share of the digest,
 * book.side_hash -- the sum mod 2**64 of mix_order over its levels (index 0 in a
 * price-keyed book, the position from 1 in a level-indexed one) -- so a message updates it
 * in O(changes) on a price-keyed side and re-sums only a level-indexed side (at most depth
 * levels) it wrote. A symbol's digest is state.symbol_digest's, hashed over the record
 * (fx_digest: the same bytes BookValues.digest_bytes packs), and the table's digest is their
 * sum plus the session's salt, as ConversionState keeps it. Symbols are found by an
 * open-addressed index over the records (SipHash-1-3 of the name under this process's key,
 * _siphash.h, whatever PYTHONHASHSEED says: a hostile feed cannot choose names that collide;
 * ``probes`` counts the slots looked at), kept in the order they came.
 *
 * Bounds: max_symbols (the run stops at a message naming one more: the Python path names
 * symbol_limit), a price-keyed side's max_prices (Fix44Run's, book_full), a level-indexed
 * side's depth. Everything is freed with the table (tracemalloc sees it: PyMem_*).
 */

#define FX_S_VOLUME 0 /* BookValues' optional session values, in book._OPTIONAL's order */
#define FX_S_LAST 1
#define FX_S_HIGH 2
#define FX_S_LOW 3
#define FX_S_OPEN 4
#define FX_S_CLOSE 5
#define FX_S_SETTLE 6
#define FX_S_INTEREST 7
#define FX_S_VWAP 8
#define FX_MAX_DEPTH 1000000

typedef struct {
    LevelTree levels; /* ShownLevel items, best first (_level_tree.h) */
    uint64_t hash;    /* book.side_hash of its levels */
} FxSide;

static inline uint32_t fx_n(const FxSide *s) { return lt_count(&s->levels); }

/* The level at ``index`` (< fx_n). */
static inline ShownLevel *fx_at(FxSide *s, uint32_t index) { return &lt_at(&s->levels, index)->shown; }

/* A symbol's values but its levels (what a message stages and a commit copies). */
typedef struct {
    int64_t volume, trade_count; /* SymbolValues */
    double high, low, last, vwap, bid, ask, notional;
    int has_book, level_indexed;
    unsigned set;      /* bit i: session[i] is set (not None) */
    double session[9]; /* FX_S_* */
    double book_notional, traded;
    int64_t trades;
} FxValues;

typedef struct {
    FxValues s;
    FxSide side[2]; /* bids, asks */
    uint64_t digest, name_hash;
    uint64_t gen; /* the table's ``writes`` when this record last changed (BookTable.patch checks it) */
    Py_ssize_t name_len;
    char name[]; /* UTF-8 */
} FxBook;

typedef struct {
    PyObject_HEAD
    FxBook **books; /* in the order the symbols came */
    Py_ssize_t count, cap;
    uint32_t *slots; /* 1 + a book's index, 0 empty: linear probing, at most half full */
    size_t n_slots;
    uint64_t digest, salt;
    Py_ssize_t max_symbols, depth;
    uint64_t probes; /* index slots looked at by lookups (tests read it) */
    uint64_t levels; /* every book's levels, both sides */
    /* The memory budget (adapter/conversion/budget.py): the run stops at a message whose new
     * symbols and levels, at these costs, would take the count past ``budget``. */
    uint64_t budget, symbol_bytes, level_bytes;
    /* Changes so far: every commit, set, patch and clear counts one. A SideView reads its side
     * only while this is what it was when the view was made. */
    uint64_t writes;
} BookTableObject;

static inline uint64_t fx_levels_of(const FxBook *b) { return (uint64_t)fx_n(&b->side[0]) + fx_n(&b->side[1]); }

/* Whether ``fresh`` new symbols and ``delta`` levels more pass the budget (BookState's two checks:
 * the new symbols alone, then the whole message, each only when it grows the count). */
static int bt_over_budget(const BookTableObject *t, Py_ssize_t fresh, int64_t delta) {
    uint64_t charged = (uint64_t)t->count * t->symbol_bytes + t->levels * t->level_bytes;
    uint64_t symbols = (uint64_t)fresh * t->symbol_bytes;
    int64_t more = (int64_t)symbols + delta * (int64_t)t->level_bytes;
    uint64_t room = charged < t->budget ? t->budget - charged : 0;
    return (symbols > 0 && symbols > room) || (more > 0 && (uint64_t)more > room);
}

static inline uint64_t fx_mix(const ShownLevel *l, uint64_t index, uint64_t side) {
    return mix_order(index, (uint64_t)l->orders, side, dbits(l->price), dbits(l->size));
}

/* book.side_hash of a whole side (``side`` 0 bids, 1 asks). */
static void fx_rehash(FxSide *s, int level_indexed, int side) {
    uint64_t sum = 0, index = 0;
    LtIter it;
    lt_first(&s->levels, &it);
    for (const LtItem *l; (l = lt_next(&it)) != NULL;) sum += fx_mix(&l->shown, level_indexed ? ++index : 0, (uint64_t)side + 1);
    s->hash = sum;
}

/* The best ``n`` levels of a side (at most fx_n) copied into ``out``. */
static void fx_copy_best(const FxSide *s, uint32_t n, ShownLevel *out) {
    LtIter it;
    lt_first(&s->levels, &it);
    for (uint32_t i = 0; i < n; i++) out[i] = lt_next(&it)->shown;
}

/* A symbol's slot hash in the table's index: keyed (_siphash.h), so names cannot be chosen to collide. */
static inline size_t fx_name_hash(const char *name, Py_ssize_t len) { return (size_t)sip_bytes(name, (size_t)len); }

/* A new record of an empty price-keyed book (SymbolValues(book=BookValues())), or NULL. */
static FxBook *fx_book_new(const char *name, Py_ssize_t len) {
    FxBook *b = PyMem_Calloc(1, sizeof *b + (size_t)len + 1);
    if (b == NULL) {
        PyErr_NoMemory();
        return NULL;
    }
    memcpy(b->name, name, (size_t)len);
    b->name_len = len;
    b->name_hash = fx_name_hash(name, len);
    b->s.has_book = 1;
    return b;
}

static void fx_book_free(FxBook *b) {
    if (b == NULL) return;
    lt_clear(&b->side[0].levels);
    lt_clear(&b->side[1].levels);
    PyMem_Free(b);
}


/* state.symbol_digest of a record with values ``s``: 0, or -1 with MemoryError. */
static int fx_digest(const FxBook *b, const FxValues *s, uint64_t *out) {
    uint8_t stack[512], *buf = stack;
    size_t need = (size_t)b->name_len + 1 + 72 + 1 + 24 + 81 + 24;
    if (need > sizeof stack && (buf = PyMem_Malloc(need)) == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    uint8_t *p = buf;
    memcpy(p, b->name, (size_t)b->name_len);
    p += b->name_len;
    *p++ = 0;
    p = be_u64(p, (uint64_t)s->volume);
    p = be_u64(p, dbits(s->high));
    p = be_u64(p, dbits(s->low));
    p = be_u64(p, dbits(s->last));
    p = be_u64(p, dbits(s->vwap));
    p = be_u64(p, (uint64_t)s->trade_count);
    p = be_u64(p, dbits(s->bid));
    p = be_u64(p, dbits(s->ask));
    p = be_u64(p, dbits(s->notional));
    if (s->has_book) { /* BookValues.digest_bytes */
        *p++ = s->level_indexed ? 'L' : 'P';
        for (int side = 0; side < 2; side++) {
            uint32_t n = fx_n(&b->side[side]);
            for (int i = 3; i >= 0; i--) *p++ = (uint8_t)(n >> (8 * i));
            p = be_u64(p, b->side[side].hash);
        }
        for (int i = 0; i < 9; i++) {
            int set = (s->set >> i) & 1;
            *p++ = set ? '+' : '-';
            if (set) p = be_u64(p, dbits(s->session[i]));
        }
        p = be_u64(p, dbits(s->book_notional));
        p = be_u64(p, dbits(s->traded));
        p = be_u64(p, (uint64_t)s->trades);
    }
    *out = blake2b_64(buf, (size_t)(p - buf));
    if (buf != stack) PyMem_Free(buf);
    return 0;
}

/* The record of a name, or NULL. */
static FxBook *bt_find(BookTableObject *t, const char *name, Py_ssize_t len, size_t *slot) {
    if (t->n_slots == 0) return NULL;
    size_t mask = t->n_slots - 1, hash = fx_name_hash(name, len);
    for (size_t i = hash & mask;; i = (i + 1) & mask) {
        uint32_t at = t->slots[i];
        t->probes++;
        if (at == 0) return NULL;
        FxBook *b = t->books[at - 1];
        if (b->name_hash == hash && b->name_len == len && memcmp(b->name, name, (size_t)len) == 0) {
            if (slot != NULL) *slot = i;
            return b;
        }
    }
}

static void bt_place(uint32_t *slots, size_t n_slots, size_t hash, uint32_t value) {
    size_t mask = n_slots - 1, i = hash & mask;
    while (slots[i] != 0) i = (i + 1) & mask;
    slots[i] = value;
}

/* Room for ``more`` new records (bt_insert cannot fail after it): 0, or -1 with MemoryError. */
static int bt_reserve(BookTableObject *t, Py_ssize_t more) {
    Py_ssize_t need = t->count + more;
    if (need >= (Py_ssize_t)(UINT32_MAX / 4)) {
        PyErr_NoMemory();
        return -1;
    }
    if (need > t->cap) {
        Py_ssize_t cap = t->cap ? t->cap : 16;
        while (cap < need) cap *= 2;
        FxBook **books = PyMem_Realloc(t->books, (size_t)cap * sizeof *books);
        if (books == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        t->books = books;
        t->cap = cap;
    }
    if ((size_t)need * 2 > t->n_slots) {
        size_t n = t->n_slots ? t->n_slots : 32;
        while (n < (size_t)need * 2) n *= 2;
        uint32_t *slots = PyMem_Calloc(n, sizeof *slots);
        if (slots == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        for (Py_ssize_t k = 0; k < t->count; k++) bt_place(slots, n, t->books[k]->name_hash, (uint32_t)k + 1);
        PyMem_Free(t->slots);
        t->slots = slots;
        t->n_slots = n;
    }
    return 0;
}

/* A new record into the table (after bt_reserve), its digest added. */
static void bt_insert(BookTableObject *t, FxBook *b) {
    t->books[t->count++] = b;
    bt_place(t->slots, t->n_slots, b->name_hash, (uint32_t)t->count);
    t->digest += b->digest;
    t->levels += fx_levels_of(b);
}

static void bt_clear(BookTableObject *t) {
    t->writes++;
    for (Py_ssize_t k = 0; k < t->count; k++) fx_book_free(t->books[k]);
    t->count = 0;
    t->levels = 0;
    if (t->slots != NULL) memset(t->slots, 0, t->n_slots * sizeof *t->slots);
    t->digest = t->salt;
}

/* ---- BookTable as Python sees it: records in and out as tuples ---- */

/* One (price, size, orders) into ``l``: 0, or -1 with an exception. Orders keep their low 64 bits
 * (what the digest and the wire use of them). */
static int fx_level_from(PyObject *level, ShownLevel *l) {
    if (!PyTuple_Check(level) || PyTuple_GET_SIZE(level) != 3 || !PyLong_Check(PyTuple_GET_ITEM(level, 2))) {
        PyErr_SetString(PyExc_TypeError, "a level is (price, size, orders)");
        return -1;
    }
    if (to_double(PyTuple_GET_ITEM(level, 0), &l->price) < 0 || to_double(PyTuple_GET_ITEM(level, 1), &l->size) < 0)
        return -1;
    uint64_t orders = PyLong_AsUnsignedLongLongMask(PyTuple_GET_ITEM(level, 2));
    if (orders == (uint64_t)-1 && PyErr_Occurred()) return -1;
    l->orders = (int64_t)orders;
    return 0;
}

/* A side from a list or tuple of (price, size, orders): 0, or -1 with an exception. */
static int fx_side_from(PyObject *levels, FxSide *out) {
    PyObject *seq = frozen(levels, "a book side is a list of (price, size, orders)");
    if (seq == NULL) return -1;
    Py_ssize_t n = PyTuple_GET_SIZE(seq);
    int rc = n >= (Py_ssize_t)UINT32_MAX ? (PyErr_NoMemory(), -1) : 0;
    for (Py_ssize_t i = 0; i < n && rc == 0; i++) {
        LtItem item;
        rc = fx_level_from(PyTuple_GET_ITEM(seq, i), &item.shown);
        if (rc == 0) rc = lt_insert(&out->levels, (uint32_t)i, &item); /* in order: appended */
    }
    Py_DECREF(seq);
    return rc;
}

/* A BookValues as a tuple (BookValues' first 15 fields, in order) into ``b``: 0, or -1. */
static int fx_book_from(PyObject *book, FxBook *b) {
    PyObject *seq = frozen(book, "a book is a tuple of BookValues' fields");
    if (seq == NULL) return -1;
    int rc = PyTuple_GET_SIZE(seq) == 15 ? 0 : -1;
    if (rc < 0) PyErr_SetString(PyExc_ValueError, "a book is BookValues' 15 fields");
    FxValues *s = &b->s;
    if (rc == 0) {
        int truth = PyObject_IsTrue(PyTuple_GET_ITEM(seq, 0));
        s->level_indexed = truth > 0;
        rc = (truth < 0 || fx_side_from(PyTuple_GET_ITEM(seq, 1), &b->side[0]) < 0 ||
              fx_side_from(PyTuple_GET_ITEM(seq, 2), &b->side[1]) < 0)
                 ? -1
                 : 0;
    }
    for (int i = 0; i < 9 && rc == 0; i++) {
        PyObject *value = PyTuple_GET_ITEM(seq, 3 + i);
        if (value == Py_None) continue;
        s->set |= 1u << i;
        rc = to_double(value, &s->session[i]);
    }
    if (rc == 0) {
        rc = (to_double(PyTuple_GET_ITEM(seq, 12), &s->book_notional) < 0 ||
              to_double(PyTuple_GET_ITEM(seq, 13), &s->traded) < 0 || to_i64(PyTuple_GET_ITEM(seq, 14), &s->trades) < 0)
                 ? -1
                 : 0;
    }
    Py_DECREF(seq);
    if (rc == 0) {
        fx_rehash(&b->side[0], s->level_indexed, 0);
        fx_rehash(&b->side[1], s->level_indexed, 1);
    }
    return rc;
}

/* SymbolValues.astuple() and the book's fields (or None) into ``b``: 0, or -1. */
static int fx_values_from(PyObject *values, PyObject *book, FxBook *b) {
    PyObject *seq = frozen(values, "values is SymbolValues.astuple()");
    if (seq == NULL) return -1;
    FxValues *s = &b->s;
    double *d[9] = {NULL, &s->high, &s->low, &s->last, &s->vwap, NULL, &s->bid, &s->ask, &s->notional};
    int rc = PyTuple_GET_SIZE(seq) == 9 ? 0 : -1;
    if (rc < 0) PyErr_SetString(PyExc_ValueError, "values is SymbolValues.astuple(): 9 values");
    for (int i = 0; i < 9 && rc == 0; i++) {
        PyObject *value = PyTuple_GET_ITEM(seq, i);
        rc = d[i] != NULL ? to_double(value, d[i]) : to_i64(value, i == 0 ? &s->volume : &s->trade_count);
    }
    Py_DECREF(seq);
    s->has_book = book != Py_None;
    if (rc == 0 && s->has_book) rc = fx_book_from(book, b);
    return rc;
}

/* Levels [start, stop) of a side (stop <= fx_n) as a list of (price, size, orders). */
static PyObject *fx_side_range(const FxSide *s, uint32_t start, uint32_t stop) {
    PyObject *list = PyList_New(stop > start ? stop - start : 0);
    LtIter it;
    lt_first(&s->levels, &it);
    if (start < stop) { /* from the level at start: a flat index, or its tree node */
        LtItem *first = lt_at((LevelTree *)&s->levels, start);
        it.at = s->levels.flat != NULL ? start : (LtRef)((LtNode *)first - s->levels.nodes) + 1;
    }
    for (uint32_t i = start; list != NULL && i < stop; i++) {
        const ShownLevel *l = &lt_next(&it)->shown;
        PyObject *level = Py_BuildValue("(ddK)", l->price, l->size, (unsigned long long)l->orders);
        if (level == NULL) Py_CLEAR(list);
        else PyList_SET_ITEM(list, i - start, level);
    }
    return list;
}

static PyObject *fx_side_list(const FxSide *s) { return fx_side_range(s, 0, fx_n(s)); }

/* ---- SideView: one side of a record, read where it is ----
 *
 * BookTable.view(symbol) gives a record as get() does, but with each book side a SideView: a
 * sequence of (price, size, orders), best first, read from the record itself -- len in O(1),
 * an item in O(log n), a slice [a:b] in O(log n + b - a) -- rather than copied whole, so the
 * Python path (BookState.stage, Fix44Engine.encode_staged) pays for the levels it looks at,
 * not for the book. A view reads only while the table has not changed since it was made
 * (``writes``): after that it raises RuntimeError rather than show another state. Compared
 * (==, <, ...) and iterated, it is the list of its levels. */
typedef struct {
    PyObject_HEAD
    BookTableObject *table;
    FxBook *book; /* good while table->writes == writes: nothing is freed without a write */
    uint64_t writes;
    int side;
} SideViewObject;

static PyTypeObject SideViewType;

/* The view's side, or NULL with RuntimeError when the table changed since the view was made. */
static FxSide *sv_side(SideViewObject *v) {
    if (v->table->writes != v->writes) {
        PyErr_SetString(PyExc_RuntimeError, "a book side read after its table changed (BookTable.view)");
        return NULL;
    }
    return &v->book->side[v->side];
}

static PyObject *sv_new(BookTableObject *t, FxBook *b, int side) {
    SideViewObject *v = PyObject_New(SideViewObject, &SideViewType);
    if (v == NULL) return NULL;
    v->table = (BookTableObject *)Py_NewRef((PyObject *)t);
    v->book = b;
    v->writes = t->writes;
    v->side = side;
    return (PyObject *)v;
}

static void SideView_dealloc(SideViewObject *v) {
    Py_XDECREF(v->table);
    PyObject_Free(v);
}

static Py_ssize_t SideView_len(SideViewObject *v) {
    FxSide *s = sv_side(v);
    return s == NULL ? -1 : (Py_ssize_t)fx_n(s);
}

static PyObject *SideView_list(SideViewObject *v) {
    FxSide *s = sv_side(v);
    return s == NULL ? NULL : fx_side_list(s);
}

static PyObject *SideView_subscript(SideViewObject *v, PyObject *key) {
    Py_ssize_t index = 0, start = 0, stop = 0, step = 1;
    int is_index = PyIndex_Check(key);
    if (is_index) { /* Python code (an __index__) runs here, before the side is looked at */
        index = PyNumber_AsSsize_t(key, PyExc_IndexError);
        if (index == -1 && PyErr_Occurred()) return NULL;
    } else if (!PySlice_Check(key)) {
        PyErr_Format(PyExc_TypeError, "book side indices must be integers or slices, not %.100s",
                     Py_TYPE(key)->tp_name);
        return NULL;
    } else if (PySlice_Unpack(key, &start, &stop, &step) < 0) {
        return NULL;
    }
    FxSide *s = sv_side(v);
    if (s == NULL) return NULL;
    Py_ssize_t n = (Py_ssize_t)fx_n(s);
    if (is_index) {
        if (index < 0) index += n;
        if (index < 0 || index >= n) {
            PyErr_SetString(PyExc_IndexError, "book side index out of range");
            return NULL;
        }
        const ShownLevel *l = fx_at(s, (uint32_t)index);
        return Py_BuildValue("(ddK)", l->price, l->size, (unsigned long long)l->orders);
    }
    Py_ssize_t count = PySlice_AdjustIndices(n, &start, &stop, step);
    if (step == 1) return fx_side_range(s, (uint32_t)start, (uint32_t)(start + count));
    PyObject *all = fx_side_list(s), *out = NULL; /* a stepped slice: rare, whole */
    if (all != NULL) out = PyObject_GetItem(all, key);
    Py_XDECREF(all);
    return out;
}

static PyObject *SideView_iter(SideViewObject *v) {
    PyObject *all = SideView_list(v), *it = NULL;
    if (all != NULL) it = PyObject_GetIter(all);
    Py_XDECREF(all);
    return it;
}

static PyObject *SideView_richcompare(SideViewObject *v, PyObject *other, int op) {
    PyObject *all = SideView_list(v), *out = NULL;
    if (all != NULL) out = PyObject_RichCompare(all, other, op);
    Py_XDECREF(all);
    return out;
}

static PyObject *SideView_repr(SideViewObject *v) {
    PyObject *all = SideView_list(v), *out = NULL;
    if (all != NULL) out = PyUnicode_FromFormat("SideView(%R)", all);
    Py_XDECREF(all);
    return out;
}

static PyObject *SideView_get_stale(SideViewObject *v, void *Py_UNUSED(closure)) {
    return PyBool_FromLong(v->table->writes != v->writes);
}

static PyGetSetDef SideView_getset[] = {
    {"stale", (getter)SideView_get_stale, NULL, "whether the table changed since the view was made", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PySequenceMethods SideView_as_sequence = {.sq_length = (lenfunc)SideView_len};
static PyMappingMethods SideView_as_mapping = {
    .mp_length = (lenfunc)SideView_len,
    .mp_subscript = (binaryfunc)SideView_subscript,
};

static PyTypeObject SideViewType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "feedha.adapter.conversion._orders.SideView",
    .tp_basicsize = sizeof(SideViewObject),
    .tp_dealloc = (destructor)SideView_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_SEQUENCE,
    .tp_doc = "One book side of a BookTable record, read in place while the table does not change.",
    .tp_as_sequence = &SideView_as_sequence,
    .tp_as_mapping = &SideView_as_mapping,
    .tp_iter = (getiterfunc)SideView_iter,
    .tp_richcompare = (richcmpfunc)SideView_richcompare,
    .tp_repr = (reprfunc)SideView_repr,
    .tp_hash = PyObject_HashNotImplemented,
    .tp_getset = SideView_getset,
};

/* A record as (SymbolValues.astuple() ..., book): book None or BookValues' 15 fields; each side
 * a list, or with ``views`` (its table) a SideView. */
static PyObject *fx_raw(FxBook *b, BookTableObject *views) {
    const FxValues *s = &b->s;
    PyObject *book = Py_None, *raw;
    if (s->has_book) {
        if ((book = PyTuple_New(15)) == NULL) return NULL;
        PyObject *items[15] = {PyBool_FromLong(s->level_indexed),
                               views ? sv_new(views, b, 0) : fx_side_list(&b->side[0]),
                               views ? sv_new(views, b, 1) : fx_side_list(&b->side[1])};
        for (int i = 0; i < 9; i++)
            items[3 + i] = (s->set >> i) & 1 ? PyFloat_FromDouble(s->session[i]) : Py_NewRef(Py_None);
        items[12] = PyFloat_FromDouble(s->book_notional);
        items[13] = PyFloat_FromDouble(s->traded);
        items[14] = PyLong_FromLongLong(s->trades);
        int failed = 0;
        for (int i = 0; i < 15; i++) {
            failed |= items[i] == NULL;
            PyTuple_SET_ITEM(book, i, items[i]);
        }
        if (failed) {
            Py_DECREF(book);
            return NULL;
        }
    } else {
        Py_INCREF(book);
    }
    raw = Py_BuildValue("(LddddLdddN)", (long long)s->volume, s->high, s->low, s->last, s->vwap,
                        (long long)s->trade_count, s->bid, s->ask, s->notional, book);
    return raw;
}

/* A str argument's UTF-8: 0, or -1 (TypeError: not a str). */
static int fx_name_of(PyObject *symbol, const char **name, Py_ssize_t *len) {
    if (!PyUnicode_Check(symbol)) {
        PyErr_Format(PyExc_TypeError, "a symbol is a str, not %.100s", Py_TYPE(symbol)->tp_name);
        return -1;
    }
    return (*name = PyUnicode_AsUTF8AndSize(symbol, len)) == NULL ? -1 : 0;
}

static PyObject *BookTable_new(PyTypeObject *type, PyObject *args, PyObject *kwds) {
    static char *kwlist[] = {NULL};
    if (!PyArg_ParseTupleAndKeywords(args, kwds, ":BookTable", kwlist)) return NULL;
    BookTableObject *self = (BookTableObject *)type->tp_alloc(type, 0);
    if (self != NULL) {
        self->max_symbols = PY_SSIZE_T_MAX;
        self->budget = UINT64_MAX; /* no budget until one is set */
    }
    return (PyObject *)self;
}

static void BookTable_dealloc(BookTableObject *self) {
    bt_clear(self);
    PyMem_Free(self->books);
    PyMem_Free(self->slots);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static Py_ssize_t BookTable_len(BookTableObject *self) { return self->count; }

static int BookTable_contains(BookTableObject *self, PyObject *key) {
    const char *name;
    Py_ssize_t len;
    if (!PyUnicode_Check(key)) return 0;
    if (fx_name_of(key, &name, &len) < 0) return -1;
    return bt_find(self, name, len, NULL) != NULL;
}

static PyObject *BookTable_get(BookTableObject *self, PyObject *symbol) {
    const char *name;
    Py_ssize_t len;
    if (fx_name_of(symbol, &name, &len) < 0) return NULL;
    FxBook *b = bt_find(self, name, len, NULL);
    return b == NULL ? Py_NewRef(Py_None) : fx_raw(b, NULL);
}

static PyObject *BookTable_symbol_hash(BookTableObject *self, PyObject *symbol) {
    const char *name;
    Py_ssize_t len;
    if (fx_name_of(symbol, &name, &len) < 0) return NULL;
    FxBook *b = bt_find(self, name, len, NULL);
    return b == NULL ? Py_NewRef(Py_None) : PyLong_FromUnsignedLongLong(b->digest);
}

/* set(symbol, values, book): adopt one symbol's values (a new record, whole, or nothing changes). */
static PyObject *BookTable_set(BookTableObject *self, PyObject *args) {
    PyObject *symbol, *values, *book;
    const char *name;
    Py_ssize_t len;
    if (!PyArg_ParseTuple(args, "UOO:set", &symbol, &values, &book) || fx_name_of(symbol, &name, &len) < 0) return NULL;
    FxBook *b = fx_book_new(name, len);
    if (b == NULL) return NULL;
    size_t slot = 0;
    if (fx_values_from(values, book, b) < 0 || fx_digest(b, &b->s, &b->digest) < 0) {
        fx_book_free(b);
        return NULL;
    }
    FxBook *old = bt_find(self, name, len, &slot); /* Python code ran above: look it up now */
    b->gen = ++self->writes;
    if (old != NULL) {
        self->books[self->slots[slot] - 1] = b;
        self->digest += b->digest - old->digest;
        self->levels += fx_levels_of(b) - fx_levels_of(old);
        fx_book_free(old);
    } else if (bt_reserve(self, 1) < 0) {
        fx_book_free(b);
        return NULL;
    } else {
        bt_insert(self, b);
    }
    Py_RETURN_NONE;
}

static PyObject *BookTable_items(BookTableObject *self, PyObject *Py_UNUSED(ignored)) {
    PyObject *out = PyList_New(self->count);
    for (Py_ssize_t k = 0; out != NULL && k < self->count; k++) {
        FxBook *b = self->books[k];
        PyObject *item = Py_BuildValue("(NN)", PyUnicode_DecodeUTF8(b->name, b->name_len, NULL), fx_raw(b, NULL));
        if (item == NULL) Py_CLEAR(out);
        else PyList_SET_ITEM(out, k, item);
    }
    return out;
}

static PyObject *BookTable_clear(BookTableObject *self, PyObject *Py_UNUSED(ignored)) {
    bt_clear(self);
    Py_RETURN_NONE;
}

static PyObject *BookTable_sizeof(BookTableObject *self, PyObject *Py_UNUSED(ignored)) {
    size_t total = sizeof *self + (size_t)self->cap * sizeof(FxBook *) + self->n_slots * sizeof(uint32_t);
    for (Py_ssize_t k = 0; k < self->count; k++) {
        const FxBook *b = self->books[k];
        total += sizeof *b + (size_t)b->name_len + 1 + lt_bytes(&b->side[0].levels) + lt_bytes(&b->side[1].levels);
    }
    return PyLong_FromSize_t(total);
}

static PyObject *BookTable_get_digest(BookTableObject *self, void *Py_UNUSED(closure)) {
    return PyLong_FromUnsignedLongLong(self->digest);
}

static PyObject *BookTable_get_probes(BookTableObject *self, void *Py_UNUSED(closure)) {
    return PyLong_FromUnsignedLongLong(self->probes);
}

static PyObject *BookTable_get_levels(BookTableObject *self, void *Py_UNUSED(closure)) {
    return PyLong_FromUnsignedLongLong(self->levels);
}

/* The budget's u64 settings: ``closure`` is the field's offset in the table. */
static PyObject *BookTable_get_u64(BookTableObject *self, void *closure) {
    return PyLong_FromUnsignedLongLong(*(uint64_t *)((char *)self + (size_t)closure));
}

static int BookTable_set_u64(BookTableObject *self, PyObject *value, void *closure) {
    uint64_t v;
    if (value == NULL) {
        PyErr_SetString(PyExc_TypeError, "a budget setting cannot be deleted");
        return -1;
    }
    if (as_u64(value, &v) < 0) return -1;
    *(uint64_t *)((char *)self + (size_t)closure) = v;
    return 0;
}

static PyObject *BookTable_get_level_steps(BookTableObject *self, void *Py_UNUSED(closure)) {
    uint64_t steps = 0; /* O(symbols): for tests */
    for (Py_ssize_t k = 0; k < self->count; k++) steps += self->books[k]->side[0].levels.steps + self->books[k]->side[1].levels.steps;
    return PyLong_FromUnsignedLongLong(steps);
}

static PyObject *BookTable_get_salt(BookTableObject *self, void *Py_UNUSED(closure)) {
    return PyLong_FromUnsignedLongLong(self->salt);
}

static int BookTable_set_salt(BookTableObject *self, PyObject *value, void *Py_UNUSED(closure)) {
    uint64_t salt;
    if (value == NULL || as_u64(value, &salt) < 0) {
        if (value == NULL) PyErr_SetString(PyExc_TypeError, "salt cannot be deleted");
        return -1;
    }
    self->digest += salt - self->salt;
    self->salt = salt;
    return 0;
}

/* A non-negative bounded Py_ssize_t setting: 0, or -1. */
static int fx_bounded_setting(PyObject *value, Py_ssize_t limit, const char *what, Py_ssize_t *out) {
    if (value == NULL) {
        PyErr_Format(PyExc_TypeError, "%s cannot be deleted", what);
        return -1;
    }
    Py_ssize_t v = PyLong_AsSsize_t(value);
    if (v == -1 && PyErr_Occurred()) return -1;
    if (v < 0 || v > limit) {
        PyErr_Format(PyExc_ValueError, "%s must be in 0..%zd, got %zd", what, limit, v);
        return -1;
    }
    *out = v;
    return 0;
}

static PyObject *BookTable_get_max_symbols(BookTableObject *self, void *Py_UNUSED(closure)) {
    return PyLong_FromSsize_t(self->max_symbols);
}

static int BookTable_set_max_symbols(BookTableObject *self, PyObject *value, void *Py_UNUSED(closure)) {
    return fx_bounded_setting(value, PY_SSIZE_T_MAX, "max_symbols", &self->max_symbols);
}

static PyObject *BookTable_get_depth(BookTableObject *self, void *Py_UNUSED(closure)) {
    return PyLong_FromSsize_t(self->depth);
}

static int BookTable_set_depth(BookTableObject *self, PyObject *value, void *Py_UNUSED(closure)) {
    return fx_bounded_setting(value, FX_MAX_DEPTH, "depth", &self->depth);
}

static PyObject *BookTable_view(BookTableObject *self, PyObject *symbol) {
    const char *name;
    Py_ssize_t len;
    if (fx_name_of(symbol, &name, &len) < 0) return NULL;
    FxBook *b = bt_find(self, name, len, NULL);
    return b == NULL ? Py_NewRef(Py_None) : fx_raw(b, self);
}

/* ---- patch: a record changed by what the Python path staged on its views ----
 *
 * patch(symbol, values, book, bids, asks) is set() for a record whose sides the Python path
 * staged over SideViews (staged_side.StagedSide): each side is either (view, ops) -- the view
 * of this record's side the staging read, and the list operations it made on it, in order:
 * (0, i, level) sets level i, (1, i, level) inserts at i, (2, i, stop) deletes [i, stop) --
 * or a list of levels that replaces the side whole. ``book`` is BookValues' 15 fields (its
 * sides are not read). The operations are played on the record in O(log n) each and a
 * price-keyed side's hash follows them (a level-indexed side, or a side whose book changed
 * kind, is summed again), so a message costs what it changed. Everything is read and checked
 * before anything changes (a view of another record, or of this one before it last changed,
 * is refused: RuntimeError); an allocation that fails while the operations play puts back
 * what they did (MemoryError, nothing changed). */

#define FX_OP_SET 0
#define FX_OP_INSERT 1
#define FX_OP_DELETE 2

typedef struct {
    int kind;
    uint32_t index, stop;
    ShownLevel level;
} FxOp;

typedef struct {
    SideViewObject *base; /* NULL: the side is replaced by ``whole`` */
    FxOp *ops;
    Py_ssize_t n_ops;
    size_t saved; /* levels the ops overwrite or delete: their room to be put back */
    FxSide whole;
} FxSidePatch;

static void fx_side_patch_clear(FxSidePatch *p) {
    PyMem_Free(p->ops);
    lt_clear(&p->whole.levels);
}

/* One op tuple into ``op``: 0, or -1 with an exception. */
static int fx_op_from(PyObject *item, FxOp *op) {
    if (!PyTuple_Check(item) || PyTuple_GET_SIZE(item) != 3) {
        PyErr_SetString(PyExc_TypeError, "a side op is (kind, index, level or stop)");
        return -1;
    }
    long kind = PyLong_AsLong(PyTuple_GET_ITEM(item, 0));
    Py_ssize_t index = PyLong_AsSsize_t(PyTuple_GET_ITEM(item, 1));
    if (PyErr_Occurred()) return -1;
    if (kind < FX_OP_SET || kind > FX_OP_DELETE || index < 0 || index >= (Py_ssize_t)UINT32_MAX) {
        PyErr_SetString(PyExc_ValueError, "a side op's kind is 0, 1 or 2 and its index a level's");
        return -1;
    }
    op->kind = (int)kind;
    op->index = (uint32_t)index;
    if (kind != FX_OP_DELETE) return fx_level_from(PyTuple_GET_ITEM(item, 2), &op->level);
    Py_ssize_t stop = PyLong_AsSsize_t(PyTuple_GET_ITEM(item, 2));
    if (stop == -1 && PyErr_Occurred()) return -1;
    if (stop < index || stop >= (Py_ssize_t)UINT32_MAX) {
        PyErr_SetString(PyExc_ValueError, "a deletion's stop is at or after its index");
        return -1;
    }
    op->stop = (uint32_t)stop;
    return 0;
}

/* A side argument of patch() read into ``p`` (Python code may run: nothing is looked at yet). */
static int fx_side_patch_from(PyObject *arg, FxSidePatch *p) {
    if (!(PyTuple_Check(arg) && PyTuple_GET_SIZE(arg) == 2 && Py_IS_TYPE(PyTuple_GET_ITEM(arg, 0), &SideViewType)))
        return fx_side_from(arg, &p->whole);
    p->base = (SideViewObject *)PyTuple_GET_ITEM(arg, 0);
    PyObject *ops = frozen(PyTuple_GET_ITEM(arg, 1), "a side's ops are a list");
    if (ops == NULL) return -1;
    p->n_ops = PyTuple_GET_SIZE(ops);
    int rc = (p->ops = PyMem_Calloc((size_t)p->n_ops + 1, sizeof *p->ops)) == NULL ? (PyErr_NoMemory(), -1) : 0;
    for (Py_ssize_t i = 0; i < p->n_ops && rc == 0; i++) rc = fx_op_from(PyTuple_GET_ITEM(ops, i), &p->ops[i]);
    Py_DECREF(ops);
    return rc;
}

/* Whether ``p``'s ops fit the side of ``b`` they are for (the view is of it, as it is now, and
 * every index is in range as the ops play): 0, or -1 with an exception. Counts p->saved. */
static int fx_side_patch_check(BookTableObject *t, FxBook *b, int side, FxSidePatch *p) {
    if (p->base == NULL) return 0;
    if (p->base->table != t || p->base->book != b || p->base->side != side || b->gen > p->base->writes) {
        PyErr_SetString(PyExc_RuntimeError, "patch() of a side staged on another record, or on this one before it changed");
        return -1;
    }
    uint64_t n = fx_n(&b->side[side]);
    p->saved = 0;
    for (Py_ssize_t i = 0; i < p->n_ops; i++) {
        const FxOp *op = &p->ops[i];
        int ok = op->kind == FX_OP_SET ? op->index < n : op->kind == FX_OP_INSERT ? op->index <= n : op->stop <= n;
        if (!ok || (op->kind == FX_OP_INSERT && n + 1 >= UINT32_MAX)) {
            PyErr_SetString(PyExc_IndexError, "a side op's index is past the side as the ops leave it");
            return -1;
        }
        n += op->kind == FX_OP_INSERT ? 1 : op->kind == FX_OP_DELETE ? -(uint64_t)(op->stop - op->index) : 0;
        p->saved += op->kind == FX_OP_SET ? 1 : op->kind == FX_OP_DELETE ? op->stop - op->index : 0;
    }
    return 0;
}

/* Ops [0, done) of ``p`` taken back, last first (``saved``: what they overwrote or deleted). */
static void fx_side_patch_undo(FxSide *s, const FxSidePatch *p, Py_ssize_t done, const ShownLevel *saved, size_t used) {
    for (Py_ssize_t i = done - 1; i >= 0; i--) {
        const FxOp *op = &p->ops[i];
        if (op->kind == FX_OP_SET) {
            *fx_at(s, op->index) = saved[--used];
        } else if (op->kind == FX_OP_INSERT) {
            lt_remove(&s->levels, op->index);
        } else {
            used -= op->stop - op->index;
            for (uint32_t k = op->index; k < op->stop; k++)
                lt_put_back(&s->levels, k, &(LtItem){.shown = saved[used + k - op->index]});
        }
    }
}

/* ``p``'s ops played on ``s`` (``incremental``: its hash follows them, index 0): 0, or -1 with
 * MemoryError and nothing changed. What they overwrote or deleted goes to ``saved``. */
static int fx_side_patch_play(FxSide *s, const FxSidePatch *p, int side, int incremental, ShownLevel *saved) {
    size_t used = 0;
    uint64_t side_no = (uint64_t)side + 1, hash = s->hash;
    for (Py_ssize_t i = 0; i < p->n_ops; i++) {
        const FxOp *op = &p->ops[i];
        if (op->kind == FX_OP_SET) {
            ShownLevel *at = fx_at(s, op->index);
            hash += fx_mix(&op->level, 0, side_no) - fx_mix(at, 0, side_no);
            saved[used++] = *at;
            *at = op->level;
        } else if (op->kind == FX_OP_INSERT) {
            if (lt_insert(&s->levels, op->index, &(LtItem){.shown = op->level}) < 0) {
                fx_side_patch_undo(s, p, i, saved, used);
                return -1;
            }
            hash += fx_mix(&op->level, 0, side_no);
        } else {
            for (uint32_t k = op->index; k < op->stop; k++) {
                ShownLevel *at = fx_at(s, op->index);
                hash -= fx_mix(at, 0, side_no);
                saved[used++] = *at;
                lt_remove(&s->levels, op->index);
            }
        }
    }
    if (incremental) s->hash = hash;
    return 0;
}

static PyObject *BookTable_patch(BookTableObject *self, PyObject *args) {
    PyObject *symbol, *values, *book, *sides[2];
    const char *name;
    Py_ssize_t len;
    if (!PyArg_ParseTuple(args, "UOOOO:patch", &symbol, &values, &book, &sides[0], &sides[1]) ||
        fx_name_of(symbol, &name, &len) < 0)
        return NULL;
    if (book == Py_None) {
        PyErr_SetString(PyExc_ValueError, "patch() is for a record with a book");
        return NULL;
    }
    FxSidePatch patches[2] = {{0}, {0}};
    ShownLevel *saved[2] = {NULL, NULL};
    PyObject *result = NULL;
    FxBook *next = fx_book_new(name, len); /* the values, and the sides that are replaced whole */
    if (next == NULL) return NULL;
    if (fx_values_from(values, book, next) < 0 || fx_side_patch_from(sides[0], &patches[0]) < 0 ||
        fx_side_patch_from(sides[1], &patches[1]) < 0)
        goto done;
    FxBook *b = bt_find(self, name, len, NULL); /* Python code ran above: look it up now */
    if (b == NULL || !b->s.has_book) {
        PyErr_SetString(PyExc_KeyError, "patch() of a symbol without a book record");
        goto done;
    }
    for (int side = 0; side < 2; side++) {
        if (fx_side_patch_check(self, b, side, &patches[side]) < 0) goto done;
        if ((saved[side] = PyMem_Malloc((patches[side].saved + 1) * sizeof(ShownLevel))) == NULL) {
            PyErr_NoMemory();
            goto done;
        }
    }
    FxValues before = b->s;
    uint64_t hashes[2] = {b->side[0].hash, b->side[1].hash}, old_levels = fx_levels_of(b);
    int incremental = !before.level_indexed && !next->s.level_indexed;
    for (int side = 0; side < 2; side++) {
        if (patches[side].base == NULL) continue;
        if (fx_side_patch_play(&b->side[side], &patches[side], side, incremental, saved[side]) < 0) {
            if (side == 1) fx_side_patch_undo(&b->side[0], &patches[0], patches[0].n_ops, saved[0], patches[0].saved);
            b->side[0].hash = hashes[0];
            goto done;
        }
    }
    FxSide kept[2];
    for (int side = 0; side < 2; side++) { /* the whole sides in, their hashes summed; the old ones kept aside */
        kept[side] = b->side[side];
        if (patches[side].base == NULL) {
            b->side[side] = patches[side].whole;
            fx_rehash(&b->side[side], next->s.level_indexed, side);
        } else if (!incremental) {
            fx_rehash(&b->side[side], next->s.level_indexed, side);
        }
    }
    b->s = next->s;
    uint64_t digest;
    if (fx_digest(b, &b->s, &digest) < 0) { /* MemoryError: everything put back */
        b->s = before;
        for (int side = 1; side >= 0; side--) {
            if (patches[side].base == NULL) b->side[side] = kept[side];
            else fx_side_patch_undo(&b->side[side], &patches[side], patches[side].n_ops, saved[side], patches[side].saved);
            b->side[side].hash = hashes[side];
        }
        goto done;
    }
    for (int side = 0; side < 2; side++) {
        if (patches[side].base == NULL) { /* the replaced side's levels freed with the patch */
            patches[side].whole = kept[side];
        } else {
            lt_trim(&b->side[side].levels);
        }
    }
    self->digest += digest - b->digest;
    self->levels += fx_levels_of(b) - old_levels;
    b->digest = digest;
    b->gen = ++self->writes;
    result = Py_NewRef(Py_None);
done:
    for (int side = 0; side < 2; side++) {
        fx_side_patch_clear(&patches[side]);
        PyMem_Free(saved[side]);
    }
    fx_book_free(next);
    return result;
}

static PyMethodDef BookTable_methods[] = {
    {"view", (PyCFunction)BookTable_view, METH_O,
     "view(symbol) -> get()'s record with each side a SideView (read in place until the table changes)"},
    {"patch", (PyCFunction)BookTable_patch, METH_VARARGS,
     "patch(symbol, values.astuple(), book fields, bids, asks): each side (view, ops) or its levels"},
    {"get", (PyCFunction)BookTable_get, METH_O, "get(symbol) -> (9 values, book fields or None), or None"},
    {"set", (PyCFunction)BookTable_set, METH_VARARGS, "set(symbol, values.astuple(), book fields or None)"},
    {"items", (PyCFunction)BookTable_items, METH_NOARGS, "items() -> [(symbol, record as get() gives it)]"},
    {"symbol_hash", (PyCFunction)BookTable_symbol_hash, METH_O, "symbol_hash(symbol) -> its share of the digest"},
    {"clear", (PyCFunction)BookTable_clear, METH_NOARGS, "clear(): no symbols (the digest is the salt)"},
    {"__sizeof__", (PyCFunction)BookTable_sizeof, METH_NOARGS, "bytes held, records and levels included"},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef BookTable_getset[] = {
    {"digest", (getter)BookTable_get_digest, NULL, "the state's digest (the symbols' and the salt, mod 2**64)", NULL},
    {"salt", (getter)BookTable_get_salt, (setter)BookTable_set_salt, "the session's share of the digest", NULL},
    {"max_symbols", (getter)BookTable_get_max_symbols, (setter)BookTable_set_max_symbols,
     "a run stops at a message naming one symbol more", NULL},
    {"depth", (getter)BookTable_get_depth, (setter)BookTable_set_depth, "the book depth", NULL},
    {"probes", (getter)BookTable_get_probes, NULL, "index slots looked at so far by lookups (for tests)", NULL},
    {"levels", (getter)BookTable_get_levels, NULL, "every book's price levels, both sides", NULL},
    {"budget", (getter)BookTable_get_u64, (setter)BookTable_set_u64,
     "the bytes the tables may count: a run stops at a message that would pass it", (void *)offsetof(BookTableObject, budget)},
    {"symbol_bytes", (getter)BookTable_get_u64, (setter)BookTable_set_u64, "what a symbol counts",
     (void *)offsetof(BookTableObject, symbol_bytes)},
    {"level_bytes", (getter)BookTable_get_u64, (setter)BookTable_set_u64, "what a price level counts",
     (void *)offsetof(BookTableObject, level_bytes)},
    {"level_steps", (getter)BookTable_get_level_steps, NULL,
     "tree nodes the held books' sides have visited so far (the levels' cost, for tests)", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PySequenceMethods BookTable_as_sequence = {
    .sq_length = (lenfunc)BookTable_len,
    .sq_contains = (objobjproc)BookTable_contains,
};

static PyTypeObject BookTableType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "feedha.adapter.conversion._orders.BookTable",
    .tp_basicsize = sizeof(BookTableObject),
    .tp_dealloc = (destructor)BookTable_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "BookTable(): fix44's conversion state in C (see adapter/formats/fix44/_native_books.py).",
    .tp_new = BookTable_new,
    .tp_methods = BookTable_methods,
    .tp_getset = BookTable_getset,
    .tp_as_sequence = &BookTable_as_sequence,
};
