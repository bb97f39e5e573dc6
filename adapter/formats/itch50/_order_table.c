/*
 * itch50's OrderTable and SideLevels: a part of the _orders extension. adapter/conversion/_orders.c
 * includes it after what the formats share (one translation unit: it is not compiled on its own).
 *
 * Theory of operation
 * -------------------
 * A market-by-order feed keeps millions of live orders. The Python reference
 * (adapter/conversion/order_table.py) holds them in a dict and four parallel
 * arrays, about 134-180 bytes an order; this part holds the same table in
 * one array of 20-byte records, 27-40 bytes a live order all told, and the
 * same price levels in sorted arrays that turn into balanced trees past 64
 * levels, with the same interface, so adapter/conversion/choice.py can hand
 * out either and adapter/formats/itch50/state.py cannot tell.
 *
 *   OrderTable   reference (u64) -> (symbol, side, price u32, shares u32).
 *                A record is the reference, price and shares and one u32 of
 *                the symbol (23 bits: 8.4 million; itch50 holds at most
 *                200,000), the side (2 bits) and the record's distance from
 *                its home slot (7 bits, 0 for an empty slot): 20 bytes, where
 *                a u64 and five fields padded to 8 bytes took 24.
 *                A reference's hash is its SipHash-1-3 under this process's
 *                random key (_siphash.h): a sender cannot pick references that
 *                share a slot, so n adds cost O(n) probes whatever they are
 *                (``probes`` counts them; tests/unit/adapter/test_hash_flood.py).
 *                Its home is the high word of hash * homes (any number of
 *                homes, not only a power of two), and the records lie in the
 *                order of their hashes, Robin Hood fashion: an add goes where
 *                its hash sorts and moves the rest of its run one slot on, a
 *                removal moves them back (no tombstones), and a lookup stops
 *                at the first record nearer its home than the probe is to the
 *                reference's. Runs do not wrap: they may end in the ORDER_TAIL
 *                slots past the last home, and no record sits more than
 *                ORDER_MAX_DIST slots from its home (an add that would make one
 *                grows the table first; at 3/4 full the farthest of a
 *                million records sits ~20 slots from its home).
 *                Why sorted: the table grows by half in place. The array is
 *                enlarged (an mremap of its own mapping: no copy, no second
 *                array held), its records packed at its end in order, then put
 *                each at max(its new home, the slot after the last) from the
 *                front; a new home is never before the old one, so no record
 *                is overwritten before it is read. Kept at most 3/4 and at
 *                least 1/2 full, the table costs 27-40 bytes a live order and
 *                never holds two arrays; doubling a power-of-two array (24-byte
 *                records, 3/8 to 3/4 full) cost 32-64 bytes, 96 while both lived.
 *                A record is placed about 3 times as the table grows to its
 *                size, and a churning day at a steady count never grows it.
 *   SideLevels   one side of one symbol's book: (sign * price, shares, orders)
 *                by the key, best first: a sorted array up to 64 levels, past
 *                that an AVL tree that counts its subtrees (_level_tree.h): a
 *                level found, added or removed in O(log n) wherever it goes
 *                (``steps`` counts the tree nodes visited;
 *                tests/unit/adapter/test_level_tree.py).
 */

/* ---- OrderTable ---- */

#if defined(__linux__)
#include <sys/mman.h>
#endif

#define ORDER_SYMBOL_BITS 23
#define ORDER_SYMBOL_MAX ((1u << ORDER_SYMBOL_BITS) - 1u) /* 8,388,607: MAX_SYMBOLS is 200,000 */
#define ORDER_SIDE_MAX 3u                                  /* BID 1, ASK 2 */
#define ORDER_MAX_DIST 126u /* the most slots a record sits past its home (dist holds 1 + that, 7 bits) */
#define ORDER_TAIL ((size_t)ORDER_MAX_DIST + 1) /* slots after the last home: the last runs end there */
#define ORDER_FIRST_HOMES ((size_t)64)

typedef struct __attribute__((packed, aligned(4))) {
    uint64_t ref;
    uint32_t price, shares;
    uint32_t symbol : ORDER_SYMBOL_BITS, side : 2, dist : 7; /* dist: 1 + slots past its home; 0: empty */
} Order; /* 20 bytes */

_Static_assert(sizeof(Order) == 20, "an Order record is 20 bytes");

typedef struct {
    PyObject_HEAD
    Order *slots; /* slots_of(homes) records, or NULL */
    size_t homes; /* 0, or how many slots a hash maps onto (any count: the table grows by half) */
    size_t count;
    uint64_t version; /* changes with every add or removal: an iterator refuses to go on after one */
    uint64_t probes;  /* slots looked at, by every lookup, add, removal and growth (tests read it) */
} OrderTableObject;

/* The records' array of a table of ``homes`` homes: the homes and the tail. Its last slot is
 * always empty (a record there would be ORDER_MAX_DIST + 1 past the last home): the runs stop. */
static inline size_t slots_of(size_t homes) { return homes ? homes + ORDER_TAIL : 0; }

/* A hash's home: the high word of hash * homes, so that homes follow the hashes' order. */
static inline size_t home_of(uint64_t hash, size_t homes) {
#ifdef __SIZEOF_INT128__
    return (size_t)(((unsigned __int128)hash * homes) >> 64);
#else
    uint64_t h_lo = (uint32_t)hash, h_hi = hash >> 32, n_lo = (uint32_t)homes, n_hi = (uint64_t)homes >> 32;
    uint64_t mid = h_hi * n_lo + ((h_lo * n_lo) >> 32);
    uint64_t mid2 = h_lo * n_hi + (uint32_t)mid;
    return (size_t)(h_hi * n_hi + (mid >> 32) + (mid2 >> 32));
#endif
}

/* ``n`` zeroed records, keeping the first ``old_n`` of ``old`` (NULL: none), or NULL. On Linux
 * the array is a mapping of its own: growing it is an mremap (no copy, no second array held),
 * freeing it gives the pages back (glibc's heap would keep them, or move its mmap threshold). */
static Order *slots_resize(Order *old, size_t old_n, size_t n) {
    if (n > (size_t)PY_SSIZE_T_MAX / sizeof(Order)) return NULL;
#if defined(__linux__)
    void *p = old == NULL ? mmap(NULL, n * sizeof(Order), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0)
                          : mremap(old, old_n * sizeof(Order), n * sizeof(Order), MREMAP_MAYMOVE);
    return p == MAP_FAILED ? NULL : (Order *)p;
#else
    Order *p = PyMem_RawRealloc(old, n * sizeof(Order));
    if (p != NULL) memset(p + old_n, 0, (n - old_n) * sizeof(Order));
    return p;
#endif
}

static void slots_free(Order *slots, size_t n) {
    if (slots == NULL) return;
#if defined(__linux__)
    munmap(slots, n * sizeof(Order));
#else
    (void)n;
    PyMem_RawFree(slots);
#endif
}

static Order *ot_find(OrderTableObject *t, uint64_t ref) {
    if (t->homes == 0) return NULL;
    Order *o = &t->slots[home_of(sip_u64(ref), t->homes)];
    for (unsigned d = 1;; d++, o++) { /* a record nearer its home than d has a later one: stop */
        t->probes++;
        if (o->dist < d) return NULL;
        if (o->ref == ref) return o;
    }
}

/* Put ``rec`` (hash ``hash``) where it goes in the hashes' order, the records from there to the
 * end of their run one slot on. 1: ``rec.ref`` was there (overwritten); 0: placed; -1: a record
 * would sit past ORDER_MAX_DIST (nothing changed: the caller grows the table). */
static int ot_place(OrderTableObject *t, Order rec, uint64_t hash) {
    Order *at = &t->slots[home_of(hash, t->homes)];
    unsigned d = 1;
    for (;; at++, d++) {
        t->probes++;
        if (at->dist < d || (at->dist == d && at->ref != rec.ref && sip_u64(at->ref) > hash)) break;
        if (at->dist == d && at->ref == rec.ref) {
            rec.dist = at->dist;
            *at = rec;
            return 1;
        }
    }
    Order *end = at;
    for (; end->dist; end++, t->probes++) {
        if (end->dist > ORDER_MAX_DIST) return -1;
    }
    if (d > ORDER_MAX_DIST + 1) return -1;
    memmove(at + 1, at, (size_t)(end - at) * sizeof(Order));
    for (Order *o = at + 1; o <= end; o++) o->dist++;
    rec.dist = d;
    *at = rec;
    return 0;
}

/* Every record of the first ``n`` slots placed anew in a fresh array of ``homes`` homes or more:
 * 0, or -1 with MemoryError. The way out when growing in place cannot place a record. */
static int ot_rebuild(OrderTableObject *t, size_t n, size_t homes) {
    for (int attempt = 0; attempt < 8; attempt++, homes *= 2) {
        OrderTableObject fresh = {.homes = homes, .slots = slots_resize(NULL, 0, slots_of(homes))};
        if (fresh.slots == NULL) break;
        size_t i = 0;
        while (i < n && (!t->slots[i].dist || ot_place(&fresh, t->slots[i], sip_u64(t->slots[i].ref)) >= 0)) i++;
        t->probes += fresh.probes;
        if (i == n) {
            slots_free(t->slots, n);
            t->slots = fresh.slots;
            t->homes = homes;
            return 0;
        }
        slots_free(fresh.slots, slots_of(homes));
    }
    PyErr_NoMemory();
    return -1;
}

/* Grow by half, in place: the array is resized, its records packed at its end (in order), then
 * each put at its new place from the front. The records are in their hashes' order and a new
 * home is never before an old one, so a record's new place is never past where it was packed
 * unless the table cannot hold them (then ot_rebuild). 0, or -1 with MemoryError. */
static int ot_grow(OrderTableObject *t) {
    size_t homes = t->homes ? t->homes + t->homes / 2 : ORDER_FIRST_HOMES;
    size_t old_n = slots_of(t->homes), n = slots_of(homes), top = n - 1; /* the last slot stays empty */
    Order *s = slots_resize(t->slots, old_n, n);
    if (s == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    t->slots = s;
    t->homes = homes;
    for (size_t i = old_n; i-- > 0;) {
        if (!s[i].dist) continue;
        Order rec = s[i];
        s[i] = (Order){0};
        s[--top] = rec;
    }
    for (size_t k = top, next = 0; k < n - 1; k++, t->probes++) {
        Order rec = s[k];
        size_t home = home_of(sip_u64(rec.ref), homes), at = home > next ? home : next;
        if (at - home > ORDER_MAX_DIST || at > k) return ot_rebuild(t, n, homes * 2); /* never seen */
        s[k] = (Order){0};
        rec.dist = (uint32_t)(at - home + 1);
        s[at] = rec;
        next = at + 1;
    }
    return 0;
}

/* Remove the record at ``o``: the records after it in its run each come one slot back. */
static void ot_erase(OrderTableObject *t, Order *o) {
    for (; o[1].dist > 1; o++, t->probes++) {
        o[0] = o[1];
        o[0].dist--;
    }
    memset(o, 0, sizeof(Order));
    t->count--;
    t->version++;
}

/* The live record at or after slot *pos, *pos moved past it; NULL after the last. The records in
 * slot order (no set order: sort what is output), for C readers that need no Python tuple. */
static inline const Order *ot_next(const OrderTableObject *t, size_t *pos) {
    for (size_t n = slots_of(t->homes); *pos < n;) {
        const Order *o = &t->slots[(*pos)++];
        if (o->dist) return o;
    }
    return NULL;
}

/* Add (or overwrite) the order ``ref``: 0, or -1 with OverflowError (a symbol or side past the
 * record's fields) or MemoryError. */
static int ot_put(OrderTableObject *t, uint64_t ref, uint32_t symbol, uint8_t side, uint32_t price, uint32_t shares) {
    if (symbol > ORDER_SYMBOL_MAX || side > ORDER_SIDE_MAX) {
        PyErr_Format(PyExc_OverflowError, "%s %u is out of range", symbol > ORDER_SYMBOL_MAX ? "symbol" : "side",
                     symbol > ORDER_SYMBOL_MAX ? symbol : (uint32_t)side);
        return -1;
    }
    if ((t->count + 1) * 4 > t->homes * 3 && ot_grow(t) < 0) return -1;
    Order rec = {.ref = ref, .price = price, .shares = shares, .symbol = symbol, .side = side};
    uint64_t hash = sip_u64(ref);
    int placed;
    while ((placed = ot_place(t, rec, hash)) < 0) { /* a record past ORDER_MAX_DIST: never seen at 3/4 full */
        if (ot_grow(t) < 0) return -1;
    }
    if (placed == 0) {
        t->count++;
        t->version++;
    }
    return 0;
}

static PyObject *OrderTable_new(PyTypeObject *type, PyObject *args, PyObject *kwds) {
    if (PyTuple_GET_SIZE(args) || (kwds && PyDict_GET_SIZE(kwds))) {
        PyErr_SetString(PyExc_TypeError, "OrderTable() takes no arguments");
        return NULL;
    }
    OrderTableObject *self = (OrderTableObject *)type->tp_alloc(type, 0);
    return (PyObject *)self; /* tp_alloc zeroes: no slots yet */
}

static void OrderTable_dealloc(OrderTableObject *self) {
    slots_free(self->slots, slots_of(self->homes));
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static Py_ssize_t OrderTable_len(OrderTableObject *self) { return (Py_ssize_t)self->count; }

static int OrderTable_contains(OrderTableObject *self, PyObject *key) {
    if (!PyLong_Check(key)) return 0;
    unsigned long long ref = PyLong_AsUnsignedLongLong(key);
    if (ref == (unsigned long long)-1 && PyErr_Occurred()) {
        PyErr_Clear(); /* a negative or too large reference is simply not live */
        return 0;
    }
    return ot_find(self, ref) != NULL;
}

static PyObject *order_tuple(const Order *o) {
    return Py_BuildValue("(IBII)", o->symbol, o->side, o->price, o->shares);
}

static PyObject *OrderTable_get(OrderTableObject *self, PyObject *key) {
    if (OrderTable_contains(self, key) <= 0) Py_RETURN_NONE;
    return order_tuple(ot_find(self, PyLong_AsUnsignedLongLong(key)));
}

static PyObject *OrderTable_add(OrderTableObject *self, PyObject *args) {
    PyObject *a[5];
    if (!PyArg_UnpackTuple(args, "add", 5, 5, &a[0], &a[1], &a[2], &a[3], &a[4])) return NULL;
    uint64_t ref, symbol, side, price, shares;
    if (as_u64(a[0], &ref) < 0 || as_bounded(a[1], ORDER_SYMBOL_MAX, "symbol", &symbol) < 0 ||
        as_bounded(a[2], ORDER_SIDE_MAX, "side", &side) < 0 || as_bounded(a[3], UINT32_MAX, "price", &price) < 0 ||
        as_bounded(a[4], UINT32_MAX, "shares", &shares) < 0)
        return NULL;
    if (ot_put(self, ref, (uint32_t)symbol, (uint8_t)side, (uint32_t)price, (uint32_t)shares) < 0) return NULL;
    Py_RETURN_NONE;
}

static Order *find_or_raise(OrderTableObject *self, PyObject *key) {
    int live = OrderTable_contains(self, key);
    if (live <= 0) {
        PyErr_SetObject(PyExc_KeyError, key);
        return NULL;
    }
    return ot_find(self, PyLong_AsUnsignedLongLong(key));
}

static PyObject *OrderTable_set_shares(OrderTableObject *self, PyObject *args) {
    PyObject *key, *value;
    uint64_t shares;
    if (!PyArg_UnpackTuple(args, "set_shares", 2, 2, &key, &value)) return NULL;
    Order *o = find_or_raise(self, key);
    if (o == NULL || as_bounded(value, UINT32_MAX, "shares", &shares) < 0) return NULL;
    o->shares = (uint32_t)shares;
    Py_RETURN_NONE;
}

static PyObject *OrderTable_remove(OrderTableObject *self, PyObject *key) {
    Order *o = find_or_raise(self, key);
    if (o == NULL) return NULL;
    ot_erase(self, o);
    Py_RETURN_NONE;
}

/* _rebuild(homes): every record placed anew in a fresh array (tests: the way out of ot_grow). */
static PyObject *OrderTable_rebuild(OrderTableObject *self, PyObject *arg) {
    Py_ssize_t homes = PyNumber_AsSsize_t(arg, PyExc_OverflowError);
    if (homes == -1 && PyErr_Occurred()) return NULL;
    if (homes <= (Py_ssize_t)self->count) {
        PyErr_Format(PyExc_ValueError, "homes must be more than the %zu orders held, got %zd", self->count, homes);
        return NULL;
    }
    if (ot_rebuild(self, slots_of(self->homes), (size_t)homes) < 0) return NULL;
    self->version++;
    Py_RETURN_NONE;
}

static PyObject *OrderTable_clear(OrderTableObject *self, PyObject *Py_UNUSED(ignored)) {
    slots_free(self->slots, slots_of(self->homes)); /* and give the memory back, as the reference does */
    self->slots = NULL;
    self->homes = self->count = 0;
    self->version++;
    Py_RETURN_NONE;
}

static PyObject *OrderTable_sizeof(OrderTableObject *self, PyObject *Py_UNUSED(ignored)) {
    return PyLong_FromSize_t(sizeof(OrderTableObject) + slots_of(self->homes) * sizeof(Order));
}

/* items(): an iterator over the live orders, (ref, symbol, side, price, shares), in no set order. */

typedef struct {
    PyObject_HEAD
    OrderTableObject *table;
    size_t pos;
    uint64_t version;
} ItemsObject;

static PyTypeObject ItemsType;

static PyObject *OrderTable_items(OrderTableObject *self, PyObject *Py_UNUSED(ignored)) {
    ItemsObject *it = PyObject_New(ItemsObject, &ItemsType);
    if (it == NULL) return NULL;
    it->table = (OrderTableObject *)Py_NewRef(self);
    it->pos = 0;
    it->version = self->version;
    return (PyObject *)it;
}

static void Items_dealloc(ItemsObject *self) {
    Py_DECREF(self->table);
    PyObject_Free(self);
}

static PyObject *Items_next(ItemsObject *self) {
    OrderTableObject *t = self->table;
    if (self->version != t->version) {
        PyErr_SetString(PyExc_RuntimeError, "OrderTable changed size during iteration");
        return NULL;
    }
    const Order *o = ot_next(t, &self->pos);
    if (o == NULL) return NULL; /* StopIteration */
    return Py_BuildValue("(KIBII)", (unsigned long long)o->ref, o->symbol, o->side, o->price, o->shares);
}

static PyTypeObject ItemsType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "feedha.adapter.conversion._orders.OrderTableItems",
    .tp_basicsize = sizeof(ItemsObject),
    .tp_dealloc = (destructor)Items_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_iter = PyObject_SelfIter,
    .tp_iternext = (iternextfunc)Items_next,
};

static PyMethodDef OrderTable_methods[] = {
    {"get", (PyCFunction)OrderTable_get, METH_O, "get(ref) -> (symbol, side, price, shares) of a live order, or None"},
    {"add", (PyCFunction)OrderTable_add, METH_VARARGS, "add(ref, symbol, side, price, shares): add a live order"},
    {"set_shares", (PyCFunction)OrderTable_set_shares, METH_VARARGS, "set_shares(ref, shares): KeyError if not live"},
    {"remove", (PyCFunction)OrderTable_remove, METH_O, "remove(ref): KeyError if not live"},
    {"clear", (PyCFunction)OrderTable_clear, METH_NOARGS, "remove every order and give the memory back"},
    {"items", (PyCFunction)OrderTable_items, METH_NOARGS, "every live order: (ref, symbol, side, price, shares)"},
    {"__sizeof__", (PyCFunction)OrderTable_sizeof, METH_NOARGS, "bytes held, the records' array included"},
    {"_rebuild", (PyCFunction)OrderTable_rebuild, METH_O, "_rebuild(homes): the records in a fresh array (tests)"},
    {NULL, NULL, 0, NULL},
};

static PyObject *OrderTable_get_probes(OrderTableObject *self, void *Py_UNUSED(closure)) {
    return PyLong_FromUnsignedLongLong(self->probes);
}

static PyGetSetDef OrderTable_getset[] = {
    {"probes", (getter)OrderTable_get_probes, NULL,
     "slots looked at so far by lookups, adds, removals and growth (the hash's cost, for tests)", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PySequenceMethods OrderTable_as_sequence = {
    .sq_length = (lenfunc)OrderTable_len,
    .sq_contains = (objobjproc)OrderTable_contains,
};

static PyTypeObject OrderTableType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "feedha.adapter.conversion._orders.OrderTable",
    .tp_basicsize = sizeof(OrderTableObject),
    .tp_dealloc = (destructor)OrderTable_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Live orders by reference, 20 bytes each (see adapter/conversion/order_table.py, OrderTable).",
    .tp_new = OrderTable_new,
    .tp_methods = OrderTable_methods,
    .tp_getset = OrderTable_getset,
    .tp_as_sequence = &OrderTable_as_sequence,
};

/* ---- SideLevels ---- */

typedef struct {
    PyObject_HEAD
    int64_t sign;
    LevelTree tree; /* Level items by key, best first (_level_tree.h) */
} SideLevelsObject;

static int sl_cmp(const LtItem *item, const void *key) {
    int64_t a = item->level.key, b = *(const int64_t *)key;
    return (a > b) - (a < b);
}

/* The level of ``key`` or NULL, and in *at its position or where it would go. */
static Level *sl_find(SideLevelsObject *s, int64_t key, uint32_t *at) {
    LtItem *item = lt_search(&s->tree, sl_cmp, &key, at);
    return item == NULL ? NULL : &item->level;
}

static PyObject *SideLevels_new(PyTypeObject *type, PyObject *args, PyObject *kwds) {
    static char *kwlist[] = {"is_bid", NULL};
    int is_bid;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "$p:SideLevels", kwlist, &is_bid)) return NULL;
    SideLevelsObject *self = (SideLevelsObject *)type->tp_alloc(type, 0);
    if (self != NULL) self->sign = is_bid ? -1 : 1;
    return (PyObject *)self;
}

static void SideLevels_dealloc(SideLevelsObject *self) {
    lt_clear(&self->tree);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static int as_i64(PyObject *obj, int64_t *out) {
    long long v = PyLong_AsLongLong(obj);
    if (v == -1 && PyErr_Occurred()) return -1;
    *out = v;
    return 0;
}

/* Add shares and orders at price (a level at 0 orders goes): 0, or -1 with MemoryError. */
static int sl_move(SideLevelsObject *s, int64_t price, int64_t shares, int64_t orders) {
    uint32_t at;
    int64_t key = s->sign * price;
    Level *found = sl_find(s, key, &at);
    int64_t count = (found ? found->count : 0) + orders;
    if (count <= 0) {
        if (found) {
            lt_remove(&s->tree, at);
            lt_trim(&s->tree);
        }
        return 0;
    }
    if (found == NULL) return lt_insert(&s->tree, at, &(LtItem){.level = {.key = key, .size = shares, .count = count}});
    found->count = count;
    found->size += shares;
    return 0;
}

/* move(price, shares, orders): add shares and orders at price; a level at 0 orders goes. */
static PyObject *SideLevels_move(SideLevelsObject *self, PyObject *args) {
    long long price, shares, orders;
    if (!PyArg_ParseTuple(args, "LLL:move", &price, &shares, &orders)) return NULL;
    if (price == LLONG_MIN) {
        PyErr_SetString(PyExc_OverflowError, "price is out of range");
        return NULL;
    }
    if (sl_move(self, price, shares, orders) < 0) return NULL;
    Py_RETURN_NONE;
}

typedef struct {
    int64_t price, size, count;
} Shown;

static PyObject *shown_list(const Shown *levels, Py_ssize_t n) {
    PyObject *out = PyList_New(n);
    if (out == NULL) return NULL;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *t = Py_BuildValue("(LLL)", (long long)levels[i].price, (long long)levels[i].size,
                                    (long long)levels[i].count);
        if (t == NULL) {
            Py_DECREF(out);
            return NULL;
        }
        PyList_SET_ITEM(out, i, t);
    }
    return out;
}

/* The level at ``price`` after a move of (d_size, d_count), appended to ``out`` unless it is empty. */
static void shown_add(SideLevelsObject *self, Shown *out, Py_ssize_t *n, int64_t price, int64_t d_size,
                      int64_t d_count) {
    uint32_t at;
    const Level *found = sl_find(self, self->sign * price, &at);
    int64_t count = (found ? found->count : 0) + d_count;
    if (count > 0) out[(*n)++] = (Shown){price, (found ? found->size : 0) + d_size, count};
}

/* How many of the best levels sl_best reads for ``depth`` after ``n_moves`` moves. */
static Py_ssize_t sl_best_top(const SideLevelsObject *s, Py_ssize_t depth, Py_ssize_t n_moves) {
    Py_ssize_t n = (Py_ssize_t)lt_count(&s->tree);
    return depth > n - n_moves ? n : depth + n_moves;
}

/* The room sl_best needs in ``out`` for ``depth`` levels after ``n_moves`` moves. */
static size_t sl_best_room(const SideLevelsObject *s, Py_ssize_t depth, Py_ssize_t n_moves) {
    return (size_t)(sl_best_top(s, depth, n_moves) + n_moves + 1);
}

/* The best ``depth`` levels after the moves ``m`` (prices unique, not applied) into ``out``
 * (sl_best_room entries): how many. As the reference: the levels among the best depth +
 * n_moves prices and the moved prices. */
static Py_ssize_t sl_best(SideLevelsObject *s, Py_ssize_t depth, const Shown *m, Py_ssize_t n_moves, Shown *out) {
    Py_ssize_t top = sl_best_top(s, depth, n_moves);
    Py_ssize_t n = 0;
    for (Py_ssize_t i = 0; i < n_moves; i++) shown_add(s, out, &n, m[i].price, m[i].size, m[i].count);
    LtIter it;
    lt_first(&s->tree, &it);
    for (Py_ssize_t i = 0; i < top; i++) {
        const Level *level = &lt_next(&it)->level;
        int64_t price = s->sign * level->key;
        int moved = 0;
        for (Py_ssize_t k = 0; k < n_moves && !moved; k++) moved = m[k].price == price;
        if (!moved) out[n++] = (Shown){price, level->size, level->count};
    }
    if (n_moves) {
        for (Py_ssize_t i = 1; i < n; i++) { /* few levels: insertion sort by sign * price */
            Shown x = out[i];
            Py_ssize_t j = i;
            while (j > 0 && s->sign * out[j - 1].price > s->sign * x.price) {
                out[j] = out[j - 1];
                j--;
            }
            out[j] = x;
        }
    }
    return n < depth ? n : depth;
}

/* The moves dict (price -> (shares, orders)) read into ``m``: 0, or -1 with an exception set. */
static int read_moves(PyObject *moves, Shown *m) {
    PyObject *key, *value;
    Py_ssize_t pos = 0, i = 0;
    while (PyDict_Next(moves, &pos, &key, &value)) {
        if (as_i64(key, &m[i].price) < 0) return -1;
        if (!PyTuple_Check(value) || PyTuple_GET_SIZE(value) != 2) {
            PyErr_SetString(PyExc_TypeError, "a move is (shares, orders)");
            return -1;
        }
        if (as_i64(PyTuple_GET_ITEM(value, 0), &m[i].size) < 0 || as_i64(PyTuple_GET_ITEM(value, 1), &m[i].count) < 0)
            return -1;
        i++;
    }
    return 0;
}

/* best(depth, moves=None): the best ``depth`` levels (price, shares, orders), after ``moves`` if given.
 * As the reference: the levels among the best depth + len(moves) prices and the moved prices. */
static PyObject *SideLevels_best(SideLevelsObject *self, PyObject *args) {
    Py_ssize_t depth;
    PyObject *moves = Py_None;
    if (!PyArg_ParseTuple(args, "n|O:best", &depth, &moves)) return NULL;
    if (depth < 0) {
        PyErr_Format(PyExc_ValueError, "depth must be >= 0, got %zd", depth);
        return NULL;
    }
    if (moves != Py_None && !PyDict_Check(moves)) {
        PyErr_SetString(PyExc_TypeError, "moves must be a dict of price -> (shares, orders)");
        return NULL;
    }
    Py_ssize_t n_moves = moves == Py_None ? 0 : PyDict_GET_SIZE(moves);
    Shown *m = PyMem_Malloc((size_t)(n_moves + 1) * sizeof(Shown));
    Shown *out = m == NULL ? NULL : PyMem_Malloc(sl_best_room(self, depth, n_moves) * sizeof(Shown));
    PyObject *result = NULL;
    if (out == NULL) {
        PyErr_NoMemory();
    } else if (!(n_moves && read_moves(moves, m) < 0)) {
        result = shown_list(out, sl_best(self, depth, m, n_moves, out));
    }
    PyMem_Free(out);
    PyMem_Free(m);
    return result;
}

static Py_ssize_t SideLevels_len(SideLevelsObject *self) { return (Py_ssize_t)lt_count(&self->tree); }

static PyObject *SideLevels_sizeof(SideLevelsObject *self, PyObject *Py_UNUSED(ignored)) {
    return PyLong_FromSize_t(sizeof(SideLevelsObject) + lt_bytes(&self->tree));
}

static PyObject *SideLevels_get_sign(SideLevelsObject *self, void *Py_UNUSED(closure)) {
    return PyLong_FromLongLong(self->sign);
}

static PyObject *SideLevels_get_steps(SideLevelsObject *self, void *Py_UNUSED(closure)) {
    return PyLong_FromUnsignedLongLong(self->tree.steps);
}

static PyObject *SideLevels_get_height(SideLevelsObject *self, void *Py_UNUSED(closure)) {
    return PyLong_FromLong(lt_tree_height(&self->tree));
}

static PyMethodDef SideLevels_methods[] = {
    {"move", (PyCFunction)SideLevels_move, METH_VARARGS, "move(price, shares, orders): a level at 0 orders goes"},
    {"best", (PyCFunction)SideLevels_best, METH_VARARGS, "best(depth, moves=None) -> [(price, shares, orders)]"},
    {"__sizeof__", (PyCFunction)SideLevels_sizeof, METH_NOARGS, "bytes held, the levels' array included"},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef SideLevels_getset[] = {
    {"sign", (getter)SideLevels_get_sign, NULL, "-1 for bids (best at the highest price), 1 for asks", NULL},
    {"steps", (getter)SideLevels_get_steps, NULL, "tree nodes visited so far (the levels' cost, for tests)", NULL},
    {"height", (getter)SideLevels_get_height, NULL, "the levels' tree height (at most 1.44 log2(n + 2))", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PySequenceMethods SideLevels_as_sequence = {.sq_length = (lenfunc)SideLevels_len};

static PyTypeObject SideLevelsType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "feedha.adapter.conversion._orders.SideLevels",
    .tp_basicsize = sizeof(SideLevelsObject),
    .tp_dealloc = (destructor)SideLevels_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "SideLevels(*, is_bid): one side of one symbol's book by price (see adapter/conversion/order_table.py).",
    .tp_new = SideLevels_new,
    .tp_methods = SideLevels_methods,
    .tp_getset = SideLevels_getset,
    .tp_as_sequence = &SideLevels_as_sequence,
};
