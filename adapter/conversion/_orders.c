/*
 * adapter.conversion._orders: the itch50 order table and price levels in C.
 *
 * Theory of operation
 * -------------------
 * A market-by-order feed keeps millions of live orders. The Python reference
 * (adapter/conversion/order_table.py) holds them in a dict and four parallel
 * arrays, about 134-180 bytes an order; this module holds the same table in
 * one open-addressed array of 24-byte records, and the same price levels in
 * sorted arrays, with the same interface, so adapter/conversion/choice.py can
 * hand out either and adapter/conversion/itch50_state.py cannot tell.
 *
 *   OrderTable   reference (u64) -> (symbol u32, side u8, price u32, shares u32).
 *                Linear probing over a power-of-two array kept at most 3/4
 *                full; a removal shifts the records after it back (no
 *                tombstones), so lookups never slow down as orders come and go.
 *   SideLevels   one side of one symbol's book: (sign * price, shares, orders)
 *                sorted by the key, best first; found by bisection.
 *   order_hash   the digest's mix of one live order, as the reference computes it.
 *   symbol_digest a symbol's share of the state's digest, as state.symbol_digest hashes it
 *                (values, then the book as BookValues.digest_bytes packs it).
 *   encode_block the payload of a book block (a MarketUpdate of SymbolUpdates), byte for
 *                byte what the protobuf runtime writes for itch50_engine.encode_staged's
 *                message (deterministic: fields by number, proto3 zeros left out, a
 *                double zero by its bits, an optional session value whenever it is set).
 *
 * Every method behaves as the reference's does for every input the reference
 * accepts (tests/unit/adapter/test_orders_native.py compares them with
 * hypothesis); out-of-range numbers raise OverflowError as the reference's
 * arrays do. Nothing here keeps a Python object per order.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "_blake2b.h"       /* blake2b_64, shared with _fastpath.c */
#include "_market_fields.h" /* generated from proto/market.proto by scripts/gen_proto.py */
#include "_protowire.h"     /* Buf and the protobuf primitives, shared with _fastpath.c */

#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* ---- order_hash: splitmix64's finalizer over an order's fields (order_table.order_hash) ---- */

#define K1 0x9E3779B97F4A7C15ULL
#define K2 0xBF58476D1CE4E5B9ULL
#define K3 0x94D049BB133111EBULL

static inline uint64_t mix_order(uint64_t ref, uint64_t symbol_hash, uint64_t side, uint64_t price, uint64_t shares) {
    uint64_t x = ref * K1 + symbol_hash + (side << 62) + price * K2 + shares * K3;
    x = (x ^ (x >> 30)) * K2;
    x = (x ^ (x >> 27)) * K3;
    return x ^ (x >> 31);
}

static PyObject *py_order_hash(PyObject *Py_UNUSED(module), PyObject *args) {
    unsigned long long ref, symbol_hash, side, price, shares; /* "K": taken mod 2**64, as the reference masks */
    if (!PyArg_ParseTuple(args, "KKKKK:order_hash", &ref, &symbol_hash, &side, &price, &shares)) return NULL;
    return PyLong_FromUnsignedLongLong(mix_order(ref, symbol_hash, side, price, shares));
}

/* ---- checked integer arguments: OverflowError outside the range, as array('I') and bytearray ---- */

static int as_u64(PyObject *obj, uint64_t *out) {
    if (!PyLong_Check(obj)) {
        PyErr_Format(PyExc_TypeError, "an integer is required, not %.100s", Py_TYPE(obj)->tp_name);
        return -1;
    }
    unsigned long long v = PyLong_AsUnsignedLongLong(obj);
    if (v == (unsigned long long)-1 && PyErr_Occurred()) return -1;
    *out = v;
    return 0;
}

static int as_bounded(PyObject *obj, uint64_t limit, const char *what, uint64_t *out) {
    if (as_u64(obj, out) < 0) return -1;
    if (*out > limit) {
        PyErr_Format(PyExc_OverflowError, "%s %llu is out of range", what, (unsigned long long)*out);
        return -1;
    }
    return 0;
}

/* ---- OrderTable ---- */

typedef struct {
    uint64_t ref;
    uint32_t symbol, price, shares;
    uint8_t side, used;
} Order; /* 24 bytes */

typedef struct {
    PyObject_HEAD
    Order *slots;
    size_t cap; /* 0 or a power of two */
    size_t count;
    uint64_t version; /* changes with every add or removal: an iterator refuses to go on after one */
} OrderTableObject;

static inline size_t home_of(uint64_t ref, size_t mask) {
    uint64_t x = ref;
    x = (x ^ (x >> 30)) * K2;
    x = (x ^ (x >> 27)) * K3;
    return (size_t)(x ^ (x >> 31)) & mask;
}

static Order *ot_find(const OrderTableObject *t, uint64_t ref) {
    if (t->cap == 0) return NULL;
    size_t mask = t->cap - 1;
    for (size_t i = home_of(ref, mask);; i = (i + 1) & mask) {
        Order *o = &t->slots[i];
        if (!o->used) return NULL;
        if (o->ref == ref) return o;
    }
}

static Order *ot_slot_for(Order *slots, size_t cap, uint64_t ref) {
    size_t mask = cap - 1;
    size_t i = home_of(ref, mask);
    while (slots[i].used && slots[i].ref != ref) i = (i + 1) & mask;
    return &slots[i];
}

static int ot_grow(OrderTableObject *t) {
    size_t cap = t->cap ? t->cap * 2 : 64;
    if (cap > ((size_t)PY_SSIZE_T_MAX / sizeof(Order))) {
        PyErr_NoMemory();
        return -1;
    }
    Order *slots = PyMem_Calloc(cap, sizeof(Order));
    if (slots == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    for (size_t i = 0; i < t->cap; i++) {
        if (t->slots[i].used) *ot_slot_for(slots, cap, t->slots[i].ref) = t->slots[i];
    }
    PyMem_Free(t->slots);
    t->slots = slots;
    t->cap = cap;
    return 0;
}

/* Remove the record at ``o`` and shift back the records of its probe run (no tombstones). */
static void ot_erase(OrderTableObject *t, Order *o) {
    size_t mask = t->cap - 1;
    size_t hole = (size_t)(o - t->slots);
    for (size_t j = (hole + 1) & mask; t->slots[j].used; j = (j + 1) & mask) {
        size_t home = home_of(t->slots[j].ref, mask);
        /* The record at j may fill the hole unless its home lies cyclically in (hole, j]. */
        int stays = hole <= j ? (hole < home && home <= j) : (hole < home || home <= j);
        if (!stays) {
            t->slots[hole] = t->slots[j];
            hole = j;
        }
    }
    memset(&t->slots[hole], 0, sizeof(Order));
    t->count--;
    t->version++;
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
    PyMem_Free(self->slots);
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
    if (as_u64(a[0], &ref) < 0 || as_bounded(a[1], UINT32_MAX, "symbol", &symbol) < 0 ||
        as_bounded(a[2], UINT8_MAX, "side", &side) < 0 || as_bounded(a[3], UINT32_MAX, "price", &price) < 0 ||
        as_bounded(a[4], UINT32_MAX, "shares", &shares) < 0)
        return NULL;
    if ((self->count + 1) * 4 > self->cap * 3 && ot_grow(self) < 0) return NULL;
    Order *o = ot_slot_for(self->slots, self->cap, ref);
    if (!o->used) {
        self->count++;
        self->version++;
    }
    *o = (Order){.ref = ref, .symbol = (uint32_t)symbol, .price = (uint32_t)price, .shares = (uint32_t)shares,
                 .side = (uint8_t)side, .used = 1};
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

static PyObject *OrderTable_clear(OrderTableObject *self, PyObject *Py_UNUSED(ignored)) {
    PyMem_Free(self->slots); /* and give the memory back, as the reference does */
    self->slots = NULL;
    self->cap = self->count = 0;
    self->version++;
    Py_RETURN_NONE;
}

static PyObject *OrderTable_sizeof(OrderTableObject *self, PyObject *Py_UNUSED(ignored)) {
    return PyLong_FromSize_t(sizeof(OrderTableObject) + self->cap * sizeof(Order));
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
    while (self->pos < t->cap) {
        const Order *o = &t->slots[self->pos++];
        if (o->used) return Py_BuildValue("(KIBII)", (unsigned long long)o->ref, o->symbol, o->side, o->price, o->shares);
    }
    return NULL; /* StopIteration */
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
    {NULL, NULL, 0, NULL},
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
    .tp_doc = "Live orders by reference, 24 bytes each (see adapter/conversion/order_table.py, OrderTable).",
    .tp_new = OrderTable_new,
    .tp_methods = OrderTable_methods,
    .tp_as_sequence = &OrderTable_as_sequence,
};

/* ---- SideLevels ---- */

typedef struct {
    int64_t key; /* sign * price: ascending is best first */
    int64_t size, count;
} Level;

typedef struct {
    PyObject_HEAD
    int64_t sign;
    Level *levels;
    Py_ssize_t n, cap;
} SideLevelsObject;

/* The index of ``key``, or where it would go (found tells which). */
static Py_ssize_t sl_search(const SideLevelsObject *s, int64_t key, int *found) {
    Py_ssize_t lo = 0, hi = s->n;
    while (lo < hi) {
        Py_ssize_t mid = lo + (hi - lo) / 2;
        if (s->levels[mid].key < key) lo = mid + 1;
        else hi = mid;
    }
    *found = lo < s->n && s->levels[lo].key == key;
    return lo;
}

static int sl_insert(SideLevelsObject *s, Py_ssize_t at, Level level) {
    if (s->n == s->cap) {
        Py_ssize_t cap = s->cap ? s->cap * 2 : 8;
        Level *grown = PyMem_Realloc(s->levels, (size_t)cap * sizeof(Level));
        if (grown == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        s->levels = grown;
        s->cap = cap;
    }
    memmove(&s->levels[at + 1], &s->levels[at], (size_t)(s->n - at) * sizeof(Level));
    s->levels[at] = level;
    s->n++;
    return 0;
}

static void sl_delete(SideLevelsObject *s, Py_ssize_t at) {
    memmove(&s->levels[at], &s->levels[at + 1], (size_t)(s->n - at - 1) * sizeof(Level));
    s->n--;
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
    PyMem_Free(self->levels);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static int as_i64(PyObject *obj, int64_t *out) {
    long long v = PyLong_AsLongLong(obj);
    if (v == -1 && PyErr_Occurred()) return -1;
    *out = v;
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
    int found;
    int64_t key = self->sign * price;
    Py_ssize_t at = sl_search(self, key, &found);
    int64_t count = (found ? self->levels[at].count : 0) + orders;
    if (count <= 0) {
        if (found) sl_delete(self, at);
        Py_RETURN_NONE;
    }
    if (!found) {
        if (sl_insert(self, at, (Level){.key = key, .size = shares, .count = count}) < 0) return NULL;
        Py_RETURN_NONE;
    }
    self->levels[at].count = count;
    self->levels[at].size += shares;
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
static void shown_add(const SideLevelsObject *self, Shown *out, Py_ssize_t *n, int64_t price, int64_t d_size,
                      int64_t d_count) {
    int found;
    Py_ssize_t at = sl_search(self, self->sign * price, &found);
    int64_t count = (found ? self->levels[at].count : 0) + d_count;
    if (count > 0) out[(*n)++] = (Shown){price, (found ? self->levels[at].size : 0) + d_size, count};
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
    Py_ssize_t top = depth > self->n - n_moves ? self->n : depth + n_moves;
    Shown *out = PyMem_Malloc((size_t)(top + 2 * n_moves + 1) * sizeof(Shown));
    if (out == NULL) return PyErr_NoMemory();
    Shown *m = out + top + n_moves; /* the moves themselves, after room for every shown level */
    Py_ssize_t n = 0;
    if (n_moves && read_moves(moves, m) < 0) {
        PyMem_Free(out);
        return NULL;
    }
    for (Py_ssize_t i = 0; i < n_moves; i++) shown_add(self, out, &n, m[i].price, m[i].size, m[i].count);
    for (Py_ssize_t i = 0; i < top; i++) {
        const Level *level = &self->levels[i];
        int64_t price = self->sign * level->key;
        int moved = 0;
        for (Py_ssize_t k = 0; k < n_moves && !moved; k++) moved = m[k].price == price;
        if (!moved) out[n++] = (Shown){price, level->size, level->count};
    }
    if (n_moves) {
        for (Py_ssize_t i = 1; i < n; i++) { /* few levels: insertion sort by sign * price */
            Shown x = out[i];
            Py_ssize_t j = i;
            while (j > 0 && self->sign * out[j - 1].price > self->sign * x.price) {
                out[j] = out[j - 1];
                j--;
            }
            out[j] = x;
        }
    }
    PyObject *result = shown_list(out, n < depth ? n : depth);
    PyMem_Free(out);
    return result;
}

static Py_ssize_t SideLevels_len(SideLevelsObject *self) { return self->n; }

static PyObject *SideLevels_sizeof(SideLevelsObject *self, PyObject *Py_UNUSED(ignored)) {
    return PyLong_FromSize_t(sizeof(SideLevelsObject) + (size_t)self->cap * sizeof(Level));
}

static PyObject *SideLevels_get_sign(SideLevelsObject *self, void *Py_UNUSED(closure)) {
    return PyLong_FromLongLong(self->sign);
}

static PyMethodDef SideLevels_methods[] = {
    {"move", (PyCFunction)SideLevels_move, METH_VARARGS, "move(price, shares, orders): a level at 0 orders goes"},
    {"best", (PyCFunction)SideLevels_best, METH_VARARGS, "best(depth, moves=None) -> [(price, shares, orders)]"},
    {"__sizeof__", (PyCFunction)SideLevels_sizeof, METH_NOARGS, "bytes held, the levels' array included"},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef SideLevels_getset[] = {
    {"sign", (getter)SideLevels_get_sign, NULL, "-1 for bids (best at the highest price), 1 for asks", NULL},
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

/* ---- encode_block: a book block's MarketUpdate ---- */

/* Attribute names, interned once (module init). */
static PyObject *N_BOOK, *N_BIDS, *N_ASKS, *N_LEVEL_INDEXED, *N_ORDERS, *N_NOTIONAL, *N_TRADED, *N_TRADES;
static PyObject *N_STATE[9];   /* SymbolValues: volume high low last vwap trade_count bid ask notional */
static PyObject *N_SESSION[9]; /* BookValues: volume last high low open close settle open_interest vwap */
static const char *STATE_NAMES[9] = {"volume", "high", "low", "last", "vwap", "trade_count", "bid", "ask", "notional"};
static const char *SESSION_NAMES[9] = {"volume", "last",   "high",          "low", "open",
                                       "close",  "settle", "open_interest", "vwap"};

static int intern_names(void) {
    N_BOOK = PyUnicode_InternFromString("book");
    N_BIDS = PyUnicode_InternFromString("bids");
    N_ASKS = PyUnicode_InternFromString("asks");
    N_LEVEL_INDEXED = PyUnicode_InternFromString("level_indexed");
    N_ORDERS = PyUnicode_InternFromString("orders");
    N_NOTIONAL = PyUnicode_InternFromString("notional");
    N_TRADED = PyUnicode_InternFromString("traded");
    N_TRADES = PyUnicode_InternFromString("trades");
    if (!N_BOOK || !N_BIDS || !N_ASKS || !N_LEVEL_INDEXED || !N_ORDERS || !N_NOTIONAL || !N_TRADED || !N_TRADES)
        return -1;
    for (int i = 0; i < 9; i++) {
        N_STATE[i] = PyUnicode_InternFromString(STATE_NAMES[i]);
        N_SESSION[i] = PyUnicode_InternFromString(SESSION_NAMES[i]);
        if (N_STATE[i] == NULL || N_SESSION[i] == NULL) return -1;
    }
    return 0;
}

/* A list or tuple as a tuple the caller owns: Python code that runs while it is read (a
 * number's __float__, say) cannot shorten it or free its items under us. */
static PyObject *frozen(PyObject *obj, const char *what) {
    if (PyTuple_Check(obj)) return Py_NewRef(obj);
    if (PyList_Check(obj)) return PyList_AsTuple(obj);
    PyErr_SetString(PyExc_TypeError, what);
    return NULL;
}

static int w_raw(Buf *b, const void *p, size_t n) {
    if (buf_reserve(b, n) < 0) return -1;
    memcpy(b->data + b->len, p, n);
    b->len += n;
    return 0;
}

static int w_varint(Buf *b, uint8_t tag, uint64_t v) { /* a proto3 integer: left out at 0 */
    if (v == 0) return 0;
    if (buf_reserve(b, 11) < 0) return -1;
    b->data[b->len] = tag;
    b->len = (size_t)(put_varint(b->data + b->len + 1, v) - b->data);
    return 0;
}

static int w_double(Buf *b, uint8_t tag, double d, int always) { /* proto3: left out when its bits are 0 */
    if (!always && dbits(d) == 0) return 0;
    if (buf_reserve(b, 9) < 0) return -1;
    b->data[b->len] = tag;
    b->len = (size_t)(put_double(b->data + b->len + 1, d) - b->data);
    return 0;
}

/* Make [start, len) the body of field ``tag``: its tag and length go in front of it. */
static int w_close(Buf *b, size_t start, uint8_t tag) {
    size_t body = b->len - start, head = 1 + varint_size(body);
    if (buf_reserve(b, head) < 0) return -1;
    memmove(b->data + start + head, b->data + start, body);
    b->data[start] = tag;
    put_varint(b->data + start + 1, body);
    b->len += head;
    return 0;
}

static int to_double(PyObject *obj, double *out) {
    *out = PyFloat_AsDouble(obj);
    return (*out == -1.0 && PyErr_Occurred()) ? -1 : 0;
}

static int to_i64(PyObject *obj, int64_t *out) { /* an int field takes an int (as the runtime) */
    if (!PyLong_Check(obj)) {
        PyErr_Format(PyExc_TypeError, "an int64 field takes an int, not %.100s", Py_TYPE(obj)->tp_name);
        return -1;
    }
    long long v = PyLong_AsLongLong(obj);
    if (v == -1 && PyErr_Occurred()) return -1;
    *out = v;
    return 0;
}

/* A (price, size) trade: Entry {type TRADE, price, size (an int), notional = price * size}. */
static int w_trade(Buf *b, PyObject *trade) {
    double price, size;
    int64_t whole;
    if (!PyTuple_Check(trade) || PyTuple_GET_SIZE(trade) != 2) {
        PyErr_SetString(PyExc_TypeError, "a trade is (price, size)");
        return -1;
    }
    PyObject *size_obj = PyTuple_GET_ITEM(trade, 1);
    if (to_double(PyTuple_GET_ITEM(trade, 0), &price) < 0 || to_i64(size_obj, &whole) < 0 ||
        to_double(size_obj, &size) < 0)
        return -1;
    size_t start = b->len;
    if (w_varint(b, FH_ENTRY_TYPE_TAG, FH_ENTRYTYPE_TRADE) < 0 || w_double(b, FH_ENTRY_PRICE_TAG, price, 0) < 0 ||
        w_varint(b, FH_ENTRY_SIZE_TAG, (uint64_t)whole) < 0 ||
        w_double(b, FH_ENTRY_NOTIONAL_TAG, price * size, 0) < 0)
        return -1;
    return w_close(b, start, FH_SYMBOLUPDATE_TRADES_TAG);
}

/* A BookChange (action, side, level, price, size, orders). */
static int w_change(Buf *b, PyObject *change) {
    int64_t action, side, level, orders;
    double price, size;
    if (!PyTuple_Check(change) || PyTuple_GET_SIZE(change) != 6) {
        PyErr_SetString(PyExc_TypeError, "a book change is (action, side, level, price, size, orders)");
        return -1;
    }
    if (to_i64(PyTuple_GET_ITEM(change, 0), &action) < 0 || to_i64(PyTuple_GET_ITEM(change, 1), &side) < 0 ||
        to_i64(PyTuple_GET_ITEM(change, 2), &level) < 0 || to_double(PyTuple_GET_ITEM(change, 3), &price) < 0 ||
        to_double(PyTuple_GET_ITEM(change, 4), &size) < 0 || to_i64(PyTuple_GET_ITEM(change, 5), &orders) < 0)
        return -1;
    if (level < 0 || level > UINT32_MAX) {
        PyErr_Format(PyExc_ValueError, "book level %lld is not a uint32", (long long)level);
        return -1;
    }
    size_t start = b->len;
    if (w_varint(b, FH_BOOKCHANGE_ACTION_TAG, (uint64_t)action) < 0 || w_varint(b, FH_BOOKCHANGE_SIDE_TAG, (uint64_t)side) < 0 ||
        w_varint(b, FH_BOOKCHANGE_LEVEL_TAG, (uint64_t)level) < 0 || w_double(b, FH_BOOKCHANGE_PRICE_TAG, price, 0) < 0 ||
        w_double(b, FH_BOOKCHANGE_SIZE_TAG, size, 0) < 0 || w_varint(b, FH_BOOKCHANGE_ORDERS_TAG, (uint64_t)orders) < 0)
        return -1;
    return w_close(b, start, FH_SYMBOLUPDATE_BOOK_CHANGES_TAG);
}

/* One side's levels, each a (price, size, orders) BookLevel. */
static int w_levels(Buf *b, PyObject *levels, uint8_t tag) {
    PyObject *seq = frozen(levels, "a book side is a list of (price, size, orders)");
    if (seq == NULL) return -1;
    int rc = 0;
    for (Py_ssize_t i = 0, n = PyTuple_GET_SIZE(seq); i < n && rc == 0; i++) {
        PyObject *level = PyTuple_GET_ITEM(seq, i);
        double price, size;
        int64_t orders;
        if (!PyTuple_Check(level) || PyTuple_GET_SIZE(level) != 3) {
            PyErr_SetString(PyExc_TypeError, "a level is (price, size, orders)");
            rc = -1;
            break;
        }
        size_t start = b->len;
        rc = (to_double(PyTuple_GET_ITEM(level, 0), &price) < 0 || to_double(PyTuple_GET_ITEM(level, 1), &size) < 0 ||
              to_i64(PyTuple_GET_ITEM(level, 2), &orders) < 0 || w_double(b, FH_BOOKLEVEL_PRICE_TAG, price, 0) < 0 ||
              w_double(b, FH_BOOKLEVEL_SIZE_TAG, size, 0) < 0 ||
              w_varint(b, FH_BOOKLEVEL_ORDERS_TAG, (uint64_t)orders) < 0 || w_close(b, start, tag) < 0)
                 ? -1
                 : 0;
    }
    Py_DECREF(seq);
    return rc;
}

/* w_attr_*: an attribute of ``obj`` written as a field (new reference dropped here). */
static int w_attr_double(Buf *b, PyObject *obj, PyObject *name, uint8_t tag, int optional) {
    PyObject *value = PyObject_GetAttr(obj, name);
    if (value == NULL) return -1;
    double d = 0.0;
    int rc = 0;
    if (!(optional && value == Py_None)) rc = to_double(value, &d) < 0 ? -1 : w_double(b, tag, d, optional);
    Py_DECREF(value);
    return rc;
}

static int w_attr_i64(Buf *b, PyObject *obj, PyObject *name, uint8_t tag) {
    PyObject *value = PyObject_GetAttr(obj, name);
    if (value == NULL) return -1;
    int64_t v;
    int rc = to_i64(value, &v) < 0 ? -1 : w_varint(b, tag, (uint64_t)v);
    Py_DECREF(value);
    return rc;
}

/* Book.orders: an MboBookValues' packed live orders (a snapshot's; a plain BookValues has none). */
static int w_snapshot_orders(Buf *b, PyObject *book) {
    PyObject *orders = PyObject_GetAttr(book, N_ORDERS);
    if (orders == NULL) {
        if (!PyErr_ExceptionMatches(PyExc_AttributeError)) return -1;
        PyErr_Clear();
        return 0;
    }
    int rc = 0;
    if (!PyBytes_Check(orders)) {
        PyErr_SetString(PyExc_TypeError, "a book's orders are bytes");
        rc = -1;
    } else if (PyBytes_GET_SIZE(orders)) {
        size_t at = b->len;
        rc = (w_raw(b, PyBytes_AS_STRING(orders), (size_t)PyBytes_GET_SIZE(orders)) < 0 ||
              w_close(b, at, FH_BOOK_ORDERS_TAG) < 0)
                 ? -1
                 : 0;
    }
    Py_DECREF(orders);
    return rc;
}

/* Book {level_indexed, depth, bids, asks, orders (a snapshot's only)} of a BookValues (None: depth only). */
static int w_book(Buf *b, PyObject *book, uint64_t depth) {
    size_t start = b->len;
    if (book != Py_None) {
        PyObject *indexed = PyObject_GetAttr(book, N_LEVEL_INDEXED);
        int truth = indexed == NULL ? -1 : PyObject_IsTrue(indexed);
        Py_XDECREF(indexed);
        if (truth < 0 || w_varint(b, FH_BOOK_LEVEL_INDEXED_TAG, (uint64_t)truth) < 0) return -1;
    }
    if (w_varint(b, FH_BOOK_DEPTH_TAG, depth) < 0) return -1;
    if (book != Py_None) {
        PyObject *bids = PyObject_GetAttr(book, N_BIDS), *asks = bids ? PyObject_GetAttr(book, N_ASKS) : NULL;
        int rc = (asks == NULL || w_levels(b, bids, FH_BOOK_BIDS_TAG) < 0 || w_levels(b, asks, FH_BOOK_ASKS_TAG) < 0) ? -1 : 0;
        Py_XDECREF(bids);
        Py_XDECREF(asks);
        if (rc < 0 || w_snapshot_orders(b, book) < 0) return -1;
    }
    return w_close(b, start, FH_SYMBOLSTATE_BOOK_TAG);
}

/* SessionValues of a BookValues. */
static int w_session(Buf *b, PyObject *book) {
    static const uint8_t tags[9] = {FH_SESSIONVALUES_VOLUME_TAG, FH_SESSIONVALUES_LAST_TAG,
                                    FH_SESSIONVALUES_HIGH_TAG,   FH_SESSIONVALUES_LOW_TAG,
                                    FH_SESSIONVALUES_OPEN_TAG,   FH_SESSIONVALUES_CLOSE_TAG,
                                    FH_SESSIONVALUES_SETTLE_TAG, FH_SESSIONVALUES_OPEN_INTEREST_TAG,
                                    FH_SESSIONVALUES_VWAP_TAG};
    size_t start = b->len;
    for (int i = 0; i < 9; i++) {
        if (w_attr_double(b, book, N_SESSION[i], tags[i], 1) < 0) return -1;
    }
    if (w_attr_double(b, book, N_NOTIONAL, FH_SESSIONVALUES_NOTIONAL_TAG, 0) < 0 ||
        w_attr_double(b, book, N_TRADED, FH_SESSIONVALUES_TRADED_TAG, 0) < 0 ||
        w_attr_i64(b, book, N_TRADES, FH_SESSIONVALUES_TRADES_TAG) < 0)
        return -1;
    return w_close(b, start, FH_SYMBOLSTATE_SESSION_TAG);
}

/* SymbolState of a SymbolValues, its book and session included. */
static int w_state(Buf *b, PyObject *values, uint64_t depth) {
    static const uint8_t tags[9] = {FH_SYMBOLSTATE_VOLUME_TAG, FH_SYMBOLSTATE_HIGH_TAG,  FH_SYMBOLSTATE_LOW_TAG,
                                    FH_SYMBOLSTATE_LAST_TAG,   FH_SYMBOLSTATE_VWAP_TAG,  FH_SYMBOLSTATE_TRADE_COUNT_TAG,
                                    FH_SYMBOLSTATE_BID_TAG,    FH_SYMBOLSTATE_ASK_TAG,   FH_SYMBOLSTATE_NOTIONAL_TAG};
    size_t start = b->len;
    for (int i = 0; i < 9; i++) {
        int rc = (i == 0 || i == 5) ? w_attr_i64(b, values, N_STATE[i], tags[i])
                                    : w_attr_double(b, values, N_STATE[i], tags[i], 0);
        if (rc < 0) return -1;
    }
    PyObject *book = PyObject_GetAttr(values, N_BOOK);
    if (book == NULL) return -1;
    /* As to_proto: no book, no session (the block still says its depth). */
    int rc = (w_book(b, book, depth) < 0 || (book != Py_None && w_session(b, book) < 0)) ? -1 : 0;
    Py_DECREF(book);
    if (rc < 0) return -1;
    return w_close(b, start, FH_SYMBOLUPDATE_STATE_TAG);
}

/* Each item of ``items`` written by ``write`` (a list or tuple). */
static int w_each(Buf *b, PyObject *items, const char *what, int (*write)(Buf *, PyObject *)) {
    PyObject *seq = frozen(items, what);
    if (seq == NULL) return -1;
    int rc = 0;
    for (Py_ssize_t i = 0, n = PyTuple_GET_SIZE(seq); i < n && rc == 0; i++)
        rc = write(b, PyTuple_GET_ITEM(seq, i));
    Py_DECREF(seq);
    return rc;
}

/* One SymbolUpdate: (symbol, trades, changes, values, orders). */
static int w_symbol(Buf *b, PyObject *item, uint64_t depth) {
    PyObject *symbol, *trades, *changes, *values;
    Py_buffer orders;
    if (!PyTuple_Check(item)) {
        PyErr_SetString(PyExc_TypeError, "a symbol is (symbol, trades, changes, values, orders)");
        return -1;
    }
    if (!PyArg_ParseTuple(item, "UOOOy*", &symbol, &trades, &changes, &values, &orders)) return -1;
    size_t start = b->len;
    Py_ssize_t name_len;
    const char *name = PyUnicode_AsUTF8AndSize(symbol, &name_len);
    int rc = name == NULL ? -1 : 0;
    if (rc == 0 && name_len) {
        size_t at = b->len;
        rc = (w_raw(b, name, (size_t)name_len) < 0 || w_close(b, at, FH_SYMBOLUPDATE_SYMBOL_TAG) < 0) ? -1 : 0;
    }
    if (rc == 0) rc = w_each(b, trades, "trades is a list of (price, size)", w_trade);
    if (rc == 0) rc = w_each(b, changes, "changes is a list of BookChange", w_change);
    if (rc == 0) rc = w_state(b, values, depth);
    if (rc == 0 && orders.len) {
        size_t at = b->len;
        rc = (w_raw(b, orders.buf, (size_t)orders.len) < 0 || w_close(b, at, FH_SYMBOLUPDATE_ORDERS_TAG) < 0) ? -1 : 0;
    }
    PyBuffer_Release(&orders);
    if (rc < 0) return -1;
    return w_close(b, start, FH_MARKETUPDATE_SYMBOLS_TAG);
}

static PyObject *py_encode_block(PyObject *Py_UNUSED(module), PyObject *args) {
    long long event_ns, publish_ns;
    unsigned long long depth;
    PyObject *symbols;
    if (!PyArg_ParseTuple(args, "LLKO:encode_block", &event_ns, &publish_ns, &depth, &symbols)) return NULL;
    if (depth > UINT32_MAX) return PyErr_Format(PyExc_ValueError, "depth %llu is not a uint32", depth);
    PyObject *seq = frozen(symbols, "symbols is a list of (symbol, trades, changes, values, orders)");
    if (seq == NULL) return NULL;
    Buf b = {0};
    int rc = (w_varint(&b, FH_MARKETUPDATE_EVENT_TIME_NS_TAG, (uint64_t)event_ns) < 0 ||
              w_varint(&b, FH_MARKETUPDATE_PUBLISH_TIME_NS_TAG, (uint64_t)publish_ns) < 0)
                 ? -1
                 : 0;
    for (Py_ssize_t i = 0, n = PyTuple_GET_SIZE(seq); i < n && rc == 0; i++)
        rc = w_symbol(&b, PyTuple_GET_ITEM(seq, i), depth);
    Py_DECREF(seq);
    PyObject *out = rc == 0 ? PyBytes_FromStringAndSize((const char *)b.data, (Py_ssize_t)b.len) : NULL;
    PyMem_Free(b.data);
    return out;
}

/* ---- symbol_digest: a symbol's share of the state digest (state.symbol_digest) ---- */

static void be64(Buf *b, uint64_t v) { /* the caller reserved 8 bytes */
    for (int i = 7; i >= 0; i--) b->data[b->len + (size_t)(7 - i)] = (uint8_t)(v >> (8 * i));
    b->len += 8;
}

/* An attribute packed as struct's ">d" (``is_int``: ">q"), into a buffer with room reserved. */
static int pack_attr(Buf *b, PyObject *obj, PyObject *name, int is_int) {
    PyObject *value = PyObject_GetAttr(obj, name);
    if (value == NULL) return -1;
    int rc;
    if (is_int) {
        int64_t v;
        rc = to_i64(value, &v);
        if (rc == 0) be64(b, (uint64_t)v);
    } else {
        double d;
        rc = to_double(value, &d);
        if (rc == 0) be64(b, dbits(d));
    }
    Py_DECREF(value);
    return rc;
}

/* One side's levels as struct.pack(">" + "ddq" * n), after their count (4 bytes, big-endian). */
static int pack_levels(Buf *b, PyObject *book, PyObject *name) {
    PyObject *levels = PyObject_GetAttr(book, name);
    PyObject *seq = levels ? frozen(levels, "a book side is a list of (price, size, orders)") : NULL;
    Py_XDECREF(levels);
    if (seq == NULL) return -1;
    Py_ssize_t n = PyTuple_GET_SIZE(seq);
    int rc = (n > (Py_ssize_t)UINT32_MAX || buf_reserve(b, 4 + (size_t)n * 24) < 0) ? -1 : 0;
    if (rc == 0) {
        for (int i = 3; i >= 0; i--) b->data[b->len++] = (uint8_t)((uint64_t)n >> (8 * i));
    }
    for (Py_ssize_t i = 0; i < n && rc == 0; i++) {
        PyObject *level = PyTuple_GET_ITEM(seq, i);
        double price, size;
        int64_t orders;
        if (!PyTuple_Check(level) || PyTuple_GET_SIZE(level) != 3) {
            PyErr_SetString(PyExc_TypeError, "a level is (price, size, orders)");
            rc = -1;
        } else if (to_double(PyTuple_GET_ITEM(level, 0), &price) < 0 || to_double(PyTuple_GET_ITEM(level, 1), &size) < 0 ||
                   to_i64(PyTuple_GET_ITEM(level, 2), &orders) < 0) {
            rc = -1;
        } else {
            be64(b, dbits(price));
            be64(b, dbits(size));
            be64(b, (uint64_t)orders);
        }
    }
    Py_DECREF(seq);
    return rc;
}

/* BookValues.digest_bytes(): kind, both sides, the optional values ("-" or "+" >d), >ddq. */
static int pack_book(Buf *b, PyObject *book) {
    PyObject *indexed = PyObject_GetAttr(book, N_LEVEL_INDEXED);
    int truth = indexed == NULL ? -1 : PyObject_IsTrue(indexed);
    Py_XDECREF(indexed);
    if (truth < 0 || buf_reserve(b, 1) < 0) return -1;
    b->data[b->len++] = truth ? 'L' : 'P';
    if (pack_levels(b, book, N_BIDS) < 0 || pack_levels(b, book, N_ASKS) < 0) return -1;
    if (buf_reserve(b, 9 * 9 + 24) < 0) return -1;
    for (int i = 0; i < 9; i++) {
        PyObject *value = PyObject_GetAttr(book, N_SESSION[i]);
        if (value == NULL) return -1;
        int unset = value == Py_None;
        double d = 0.0;
        int rc = unset ? 0 : to_double(value, &d);
        Py_DECREF(value);
        if (rc < 0) return -1;
        b->data[b->len++] = unset ? '-' : '+';
        if (!unset) be64(b, dbits(d));
    }
    return (pack_attr(b, book, N_NOTIONAL, 0) < 0 || pack_attr(b, book, N_TRADED, 0) < 0 ||
            pack_attr(b, book, N_TRADES, 1) < 0)
               ? -1
               : 0;
}

/* symbol_digest(symbol, values): blake2b-64 of the symbol, b"\0", the values (">qddddqddd") and the book. */
static PyObject *py_symbol_digest(PyObject *Py_UNUSED(module), PyObject *args) {
    PyObject *symbol, *values;
    if (!PyArg_ParseTuple(args, "UO:symbol_digest", &symbol, &values)) return NULL;
    Py_ssize_t name_len;
    const char *name = PyUnicode_AsUTF8AndSize(symbol, &name_len);
    if (name == NULL) return NULL;
    Buf b = {0};
    int rc = (w_raw(&b, name, (size_t)name_len) < 0 || w_raw(&b, "", 1) < 0 || buf_reserve(&b, 72) < 0) ? -1 : 0;
    for (int i = 0; i < 9 && rc == 0; i++) rc = pack_attr(&b, values, N_STATE[i], i == 0 || i == 5);
    PyObject *book = rc == 0 ? PyObject_GetAttr(values, N_BOOK) : NULL;
    if (book == NULL) rc = -1;
    if (rc == 0 && book != Py_None) rc = pack_book(&b, book);
    Py_XDECREF(book);
    PyObject *out = rc == 0 ? PyLong_FromUnsignedLongLong(blake2b_64(b.data, b.len)) : NULL;
    PyMem_Free(b.data);
    return out;
}

/* ---- the module ---- */

static PyMethodDef module_methods[] = {
    {"order_hash", py_order_hash, METH_VARARGS, "order_hash(ref, symbol_hash, side, price, shares) -> u64"},
    {"symbol_digest", py_symbol_digest, METH_VARARGS, "symbol_digest(symbol, values) -> u64 (state.symbol_digest)"},
    {"encode_block", py_encode_block, METH_VARARGS,
     "encode_block(event_time_ns, publish_time_ns, depth, [(symbol, trades, changes, values, orders)]) -> bytes"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    .m_base = PyModuleDef_HEAD_INIT,
    .m_name = "_orders",
    .m_doc = "The itch50 order table and price levels in C (see adapter/conversion/order_table.py).",
    .m_size = -1,
    .m_methods = module_methods,
};

PyMODINIT_FUNC PyInit__orders(void) {
    if (PyType_Ready(&OrderTableType) < 0 || PyType_Ready(&ItemsType) < 0 || PyType_Ready(&SideLevelsType) < 0 ||
        intern_names() < 0)
        return NULL;
    PyObject *m = PyModule_Create(&module);
    if (m == NULL) return NULL;
    if (PyModule_AddObjectRef(m, "OrderTable", (PyObject *)&OrderTableType) < 0 ||
        PyModule_AddObjectRef(m, "SideLevels", (PyObject *)&SideLevelsType) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
