/*
 * itch50's MboRun: a part of the _orders extension. adapter/conversion/_orders.c
 * includes it after what the formats share (one translation unit: it is not compiled on its own).
 */

/* ---- MboRun: a run of A F E C X D U P Q R messages converted whole in C ----
 *
 * MboRun(state, values_type, book_type).run(...) is Itch50Engine.run for the messages that
 * give a block: those that move one live order (A F E C X D U), and trades, crosses and
 * directory messages of a symbol the state knows (P Q R: the symbol's session values, the
 * shown book unchanged). The reference is the Python loop (conversion/_reference.LoopEngine.run over
 * itch50/state.MboState.stage/commit and itch50/engine.Itch50Engine.encode_staged), and this
 * does what it does, to the same state: its order table and price levels (this module's), its
 * symbols' values and hashes -- records of a SymbolMap (_symbol_map.c), read and written in
 * place: no Python object is made or read for a message -- and its two digests. Python reads
 * a symbol's values from its record as SymbolValues, as it read the reference's. Anything else
 * stops the run (STOP_SLOW) before anything changes and the Python path takes that message:
 * another type (those that move nothing: counted and skipped there), a record out of the run,
 * a symbol never seen, an unknown or duplicate order, bad shares, a full table, a symbol whose
 * values Python set to types its record cannot hold exactly, or arithmetic the doubles here could round otherwise than Python's
 * integers (a cross of more shares than a u32 holds) (tests/unit/adapter/test_mbo_run.py compares
 * the two on the same input, block for block and digest for digest).
 */

#include "structmember.h" /* T_OBJECT_EX, READONLY: the slots of SymbolValues and BookValues */

static PyObject *N_INDEX, *N_NAMES, *N_SIDES, *N_NAME_HASHES, *N_VALUES, *N_HASHES, *N_DIGEST, *N_ORDERS_DIGEST,
    *N_MAX_ORDERS, *N_DEPTH;

static int intern_run_names(void) {
    static const Name names[] = {
        {&N_INDEX, "_index"},     {&N_NAMES, "_names"},   {&N_SIDES, "_sides"},
        {&N_NAME_HASHES, "_name_hashes"}, {&N_VALUES, "_values"}, {&N_HASHES, "_hashes"},
        {&N_DIGEST, "_digest"},   {&N_ORDERS_DIGEST, "_orders_digest"}, {&N_MAX_ORDERS, "order_cap"},
        {&N_DEPTH, "depth"},
    };
    return intern_each(names, sizeof names / sizeof names[0]);
}

#define ITCH_BID 1 /* market.proto Side: B (buy) is the bid side */
#define ITCH_ASK 2
#define PRICE_SCALE 10000.0
#define OP_ADD_ORDER 0 /* itch50_state.py ADD, REMOVE, SHARES */
#define OP_REMOVE_ORDER 1
#define OP_SET_SHARES 2

#define VALUE_SLOTS 10 /* SymbolValues: the nine values (N_STATE), then book */
#define BOOK_SLOTS 18  /* BookValues: level_indexed bids asks, the nine session values, notional traded trades,
                          then shared cache level_bytes (the staging's bookkeeping: 0, {}, {} when new) */

typedef struct {
    PyObject_HEAD
    PyObject *state, *values_type, *book_type;
    /* Where the value types keep their fields (slots: dataclass(slots=True)), or 0 in
     * value_at[0]: the run builds them by calling the types and reads them by attribute. */
    Py_ssize_t value_at[VALUE_SLOTS], book_at[BOOK_SLOTS];
} RunObject; /* MboRun: the state and the value types it builds */

typedef RunObject MboRunObject;

/* The offset of ``type``'s slot ``name`` (a T_OBJECT_EX member), or 0 when it has no such slot. */
static Py_ssize_t slot_offset(PyObject *type, const char *name) {
    if (!PyType_Check(type)) return 0;
    PyObject *d = PyDict_GetItemString(((PyTypeObject *)type)->tp_dict, name); /* borrowed, no exception */
    if (d == NULL || !Py_IS_TYPE(d, &PyMemberDescr_Type)) return 0;
    PyMemberDef *m = ((PyMemberDescrObject *)d)->d_member;
    return (m->type == T_OBJECT_EX && !(m->flags & READONLY) && m->offset > 0) ? m->offset : 0;
}

/* The slots of both value types, all or none: a type that is not the slotted dataclass the
 * run knows (another implementation, a subclass with its own __init__) is built by calling it. */
static void find_slots(PyObject *values_type, PyObject *book_type, Py_ssize_t *value_at, Py_ssize_t *book_at) {
    static const char *book_extra[3] = {"shared", "cache", "level_bytes"};
    PyObject *book_names[15] = {N_LEVEL_INDEXED, N_BIDS, N_ASKS, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
                                N_NOTIONAL, N_TRADED, N_TRADES};
    for (int i = 0; i < 9; i++) book_names[3 + i] = N_SESSION[i];
    int ok = PyType_Check(values_type) && PyType_Check(book_type);
    for (int i = 0; i < VALUE_SLOTS && ok; i++)
        ok = (value_at[i] = slot_offset(values_type, i < 9 ? PyUnicode_AsUTF8(N_STATE[i]) : "book")) > 0;
    for (int i = 0; i < BOOK_SLOTS && ok; i++)
        ok = (book_at[i] = slot_offset(book_type, i < 15 ? PyUnicode_AsUTF8(book_names[i]) : book_extra[i - 15])) > 0;
    if (!ok) value_at[0] = 0;
    PyErr_Clear();
}

/* A new run object holding its state and value types (MboRun's tp_new ends here). */
static PyObject *run_object(PyTypeObject *type, PyObject *state, PyObject *values_type, PyObject *book_type) {
    RunObject *self = (RunObject *)type->tp_alloc(type, 0);
    if (self == NULL) return NULL;
    self->state = Py_NewRef(state);
    self->values_type = Py_NewRef(values_type);
    self->book_type = Py_NewRef(book_type);
    find_slots(values_type, book_type, self->value_at, self->book_at);
    return (PyObject *)self;
}

#define SLOT(obj, at) (*(PyObject **)((char *)(obj) + (at)))

/* An object of ``type`` with its slots set to ``items`` (new references taken) and ``extra``
 * more slots made by the caller (stolen): what calling the dataclass does, without its
 * Python __init__. NULL with an exception. */
static PyObject *build_slotted(PyObject *type, const Py_ssize_t *at, PyObject *const *items, int n,
                               PyObject **extra, int n_extra) {
    int missing = 0;
    for (int i = 0; i < n; i++) missing |= items[i] == NULL;
    PyObject *obj = missing ? NULL : ((PyTypeObject *)type)->tp_alloc((PyTypeObject *)type, 0);
    if (missing) PyErr_SetString(PyExc_SystemError, "a value the run built is missing");
    for (int i = 0; i < n_extra; i++) {
        if (obj == NULL || extra[i] == NULL) {
            for (int k = i; k < n_extra; k++) Py_CLEAR(extra[k]);
            Py_XDECREF(obj);
            return NULL;
        }
        SLOT(obj, at[n + i]) = extra[i];
    }
    if (obj == NULL) return NULL;
    for (int i = 0; i < n; i++) SLOT(obj, at[i]) = Py_NewRef(items[i]);
    return obj;
}

/* ``values``' fields into ``n`` as view_of reads them, from the slots where it is of the run's
 * own types (an unset slot: the attribute's AttributeError, as view_of). */
static int run_view_of(RunObject *self, PyObject *values, NewValues *n) {
    if (self->value_at[0] == 0 || !Py_IS_TYPE(values, (PyTypeObject *)self->values_type)) return view_of(values, n);
    PyObject *book = SLOT(values, self->value_at[9]);
    if (book != NULL && book != Py_None && !Py_IS_TYPE(book, (PyTypeObject *)self->book_type)) return view_of(values, n);
    for (int i = 0; i < 10; i++) {
        PyObject *item = SLOT(values, self->value_at[i]);
        if (item == NULL) return view_of(values, n);
        n->v[i] = Py_NewRef(item);
    }
    if (book == Py_None) {
        Py_CLEAR(n->v[9]);
        return 0;
    }
    for (int i = 0; i < 15; i++) {
        PyObject *item = SLOT(book, self->book_at[i]);
        if (item == NULL) {
            new_values_clear(n);
            return view_of(values, n);
        }
        n->k[i] = Py_NewRef(item);
    }
    return 0;
}

static void run_dealloc(RunObject *self) {
    Py_XDECREF(self->state);
    Py_XDECREF(self->values_type);
    Py_XDECREF(self->book_type);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

/* A live order as a snapshot packs it (ORDER_RECORD: ref, side, price, shares). */
typedef struct {
    uint64_t ref;
    uint32_t symbol, price, shares;
    uint8_t side;
} LiveOrder;

static int live_order_cmp(const void *a, const void *b) {
    const LiveOrder *x = a, *y = b;
    if (x->symbol != y->symbol) return x->symbol < y->symbol ? -1 : 1;
    return x->ref < y->ref ? -1 : x->ref > y->ref;
}

static int order_record(Buf *b, uint64_t ref, uint8_t side, uint32_t price, uint32_t shares) {
    if (buf_reserve(b, 17) < 0) return -1;
    uint8_t *p = b->data + b->len;
    put_be64(p, ref);
    p[8] = side;
    for (int i = 0; i < 4; i++) p[9 + i] = (uint8_t)(price >> (24 - 8 * i));
    for (int i = 0; i < 4; i++) p[13 + i] = (uint8_t)(shares >> (24 - 8 * i));
    b->len += 17;
    return 0;
}

#include "_symbol_map.c" /* SymbolMap: the symbols' values in C records */

/* One decoded message (itch50_parser.parse_itch's fields for A F E C X D U P Q R). */
typedef struct {
    uint64_t seq, ref, new_ref;
    int64_t ns;
    char kind;
    uint8_t side, printable;
    uint32_t shares, price;
    const uint8_t *stock; /* A F P Q R: the 8-byte stock field */
} ItchMsg;

typedef struct {
    int kind;
    uint64_t ref;
    uint32_t symbol, price, shares;
    uint8_t side;
} OrderOp;

/* One run() call: the state's parts (read at its start) and what it has collected. */
typedef struct {
    OrderTableObject *orders;
    PyObject *index, *names, *sides, *name_hashes; /* owned */
    SymbolMapObject *map;                          /* owned: the state's _values */
    uint64_t digest, orders_digest, max_orders;
    Py_ssize_t depth;
    long long expect_seq, stop_seq, room;
    int empty_packet, source_stream, publish;
    Py_ssize_t max_count, count;
    long long publish_ns, first_seq;
    Buf blocks, digests;
    PyObject *payloads;
} MboCtx;

static inline uint64_t rd_be(const uint8_t *p, int n) {
    uint64_t v = 0;
    for (int i = 0; i < n; i++) v = (v << 8) | p[i];
    return v;
}

/* The record body (u64 sequence number, then the ITCH message) decoded: 0, or -1 when the
 * Python path must take it (another type, a wrong length, sequence number 0). */
static int itch_take(const uint8_t *body, size_t len, ItchMsg *m) {
    if (len < 9) return -1;
    m->seq = rd_be(body, 8);
    m->kind = (char)body[8];
    size_t want;
    switch (m->kind) {
    case 'A': want = 36; break;
    case 'F': want = 40; break;
    case 'E': want = 31; break;
    case 'C': want = 36; break;
    case 'X': want = 23; break;
    case 'D': want = 19; break;
    case 'U': want = 35; break;
    case 'P': want = 44; break;
    case 'Q': want = 40; break;
    case 'R': want = 39; break;
    default: return -1;
    }
    if (m->seq == 0 || m->seq > MAX_SOURCE_SEQ || len - 8 != want) return -1; /* bad_seq: the Python path */
    const uint8_t *p = body + 8, *f = p + 11; /* type, locate, tracking, 6-byte timestamp, then the fields */
    m->ns = (int64_t)rd_be(p + 5, 6);
    m->ref = rd_be(f, 8);
    switch (m->kind) {
    case 'A':
    case 'F':
    case 'P': /* P lays out ref, side, shares, stock and price as A does (its side is not checked) */
        m->side = f[8];
        m->shares = (uint32_t)rd_be(f + 9, 4);
        m->stock = f + 13;
        m->price = (uint32_t)rd_be(f + 21, 4);
        break;
    case 'C':
        m->printable = f[20];
        m->price = (uint32_t)rd_be(f + 21, 4);
        m->shares = (uint32_t)rd_be(f + 8, 4);
        break;
    case 'E':
    case 'X': m->shares = (uint32_t)rd_be(f + 8, 4); break;
    case 'U':
        m->new_ref = rd_be(f + 8, 8);
        m->shares = (uint32_t)rd_be(f + 16, 4);
        m->price = (uint32_t)rd_be(f + 20, 4);
        break;
    case 'Q': /* u64 shares: past a u32 the arithmetic is the Python path's (its int products) */
        if (rd_be(f, 8) > UINT32_MAX) return -1;
        m->shares = (uint32_t)rd_be(f, 8);
        m->stock = f + 8;
        m->price = (uint32_t)rd_be(f + 16, 4);
        break;
    case 'R': m->stock = f; break;
    default: break;
    }
    return 0;
}

/* ---- one message ---- */

/* What one message does before anything is applied: its order ops, its level moves, its trade. */
typedef struct {
    ItchMsg m;
    uint32_t symbol;
    uint8_t side;
    OrderOp ops[2];
    int n_ops;
    Shown moves[2];
    Py_ssize_t n_moves;
    int has_trade;
    uint32_t trade_price, trade_shares;
} Staged;

/* Check and stage ``m`` against the order table: 0, or STOP_SLOW (the reference would raise). */
static int stage_orders(MboCtx *c, Staged *s) {
    const ItchMsg *m = &s->m;
    s->n_ops = 0;
    s->n_moves = 1;
    s->has_trade = 0;
    if (m->kind == 'A' || m->kind == 'F') {
        if (m->side != 'B' && m->side != 'S') return STOP_SLOW;
        if (ot_find(c->orders, m->ref) != NULL || m->shares == 0 || c->orders->count >= c->max_orders)
            return STOP_SLOW;
        s->side = m->side == 'B' ? ITCH_BID : ITCH_ASK; /* s->symbol: the caller's, from the stock */
        s->ops[s->n_ops++] = (OrderOp){OP_ADD_ORDER, m->ref, s->symbol, m->price, m->shares, s->side};
        s->moves[0] = (Shown){m->price, m->shares, 1};
        return 0;
    }
    if (m->kind == 'C' && m->printable != 'Y' && m->printable != 'N') return STOP_SLOW;
    const Order *o = ot_find(c->orders, m->ref);
    if (o == NULL) return STOP_SLOW;
    s->symbol = o->symbol;
    s->side = o->side;
    if (m->kind == 'D' || m->kind == 'U') {
        s->ops[s->n_ops++] = (OrderOp){OP_REMOVE_ORDER, m->ref, 0, 0, 0, 0};
        s->moves[0] = (Shown){o->price, -(int64_t)o->shares, -1};
        if (m->kind == 'U') {
            if ((m->new_ref != m->ref && ot_find(c->orders, m->new_ref) != NULL) || m->shares == 0) return STOP_SLOW;
            if (m->price == o->price) {
                s->moves[0].size += m->shares;
                s->moves[0].count += 1;
            } else {
                s->moves[s->n_moves++] = (Shown){m->price, m->shares, 1};
            }
            s->ops[s->n_ops++] = (OrderOp){OP_ADD_ORDER, m->new_ref, o->symbol, m->price, m->shares, o->side};
        }
        return 0;
    }
    if (m->shares > o->shares) return STOP_SLOW;
    uint32_t left = o->shares - m->shares;
    s->ops[s->n_ops++] = left == 0 ? (OrderOp){OP_REMOVE_ORDER, m->ref, 0, 0, 0, 0}
                                   : (OrderOp){OP_SET_SHARES, m->ref, 0, 0, left, 0};
    s->moves[0] = (Shown){o->price, -(int64_t)m->shares, left == 0 ? -1 : 0};
    if (m->kind == 'E' || (m->kind == 'C' && m->printable == 'Y')) {
        s->has_trade = 1;
        s->trade_price = m->kind == 'E' ? o->price : m->price;
        s->trade_shares = m->shares;
    }
    return 0;
}

/* The symbol index of an add's stock, as the reference's _index has it: 0, or STOP_SLOW
 * (a stock the Python path must decode or intern), or -1 with an exception. */
static int stock_symbol(MboCtx *c, const uint8_t *stock, uint32_t *symbol) {
    Py_ssize_t n = 8;
    while (n > 0 && (stock[n - 1] == ' ' || stock[n - 1] == 0)) n--;
    if (n == 0) return STOP_SLOW;
    for (Py_ssize_t i = 0; i < n; i++) {
        if (stock[i] >= 0x80) return STOP_SLOW; /* decoded with replacement characters in Python */
    }
    PyObject *name = PyUnicode_FromStringAndSize((const char *)stock, n);
    if (name == NULL) return -1;
    PyObject *index = PyDict_GetItemWithError(c->index, name);
    Py_DECREF(name);
    if (index == NULL) return PyErr_Occurred() ? -1 : STOP_SLOW;
    unsigned long v = PyLong_Check(index) ? PyLong_AsUnsignedLong(index) : (unsigned long)-1;
    if (v == (unsigned long)-1) {
        PyErr_Clear();
        return STOP_SLOW;
    }
    *symbol = (uint32_t)v;
    return 0;
}

/* The current values' fields (or a new symbol's defaults; a book-less one gets an empty book)
 * as new references in ``n``; n->v[9] stays NULL (the run makes the new book). */
static int load_values(RunObject *self, PyObject *current, NewValues *n) {
    int rc = 0;
    if (current != NULL) {
        if (run_view_of(self, current, n) < 0) return -1;
        if (n->v[9] != NULL) {
            Py_CLEAR(n->v[9]);
            return 0;
        }
    } else {
        for (int i = 0; i < 9; i++) {
            n->v[i] = (i == 0 || i == 5) ? PyLong_FromLong(0) : PyFloat_FromDouble(0.0);
            if (n->v[i] == NULL) return -1;
        }
    }
    n->k[0] = Py_NewRef(Py_False);
    n->k[1] = PyList_New(0);
    n->k[2] = PyList_New(0);
    for (int i = 0; i < 9; i++) n->k[3 + i] = Py_NewRef(Py_None);
    n->k[12] = PyFloat_FromDouble(0.0);
    n->k[13] = PyFloat_FromDouble(0.0);
    n->k[14] = PyLong_FromLong(0);
    for (int i = 0; i < 15 && rc == 0; i++) rc = n->k[i] == NULL ? -1 : 0;
    return rc;
}

static int mbo_commit_ops(MboCtx *c, const Staged *s, SideLevelsObject *levels, uint64_t name_hash) {
    for (int i = 0; i < s->n_ops; i++) {
        const OrderOp *op = &s->ops[i];
        if (op->kind == OP_ADD_ORDER) {
            if (ot_put(c->orders, op->ref, op->symbol, op->side, op->price, op->shares) < 0 ||
                sl_move(levels, op->price, op->shares, 1) < 0)
                return -1;
            uint64_t mixed = mix_order(op->ref, name_hash, op->side, op->price, op->shares);
            c->orders_digest += mixed;
            c->digest += mixed;
            continue;
        }
        Order *o = ot_find(c->orders, op->ref);
        if (o == NULL) {
            PyErr_Format(PyExc_RuntimeError, "order %llu vanished between staging and commit",
                         (unsigned long long)op->ref);
            return -1;
        }
        uint32_t price = o->price, shares = o->shares;
        uint64_t old = mix_order(op->ref, name_hash, o->side, price, shares);
        c->orders_digest -= old;
        c->digest -= old;
        if (op->kind == OP_REMOVE_ORDER) {
            ot_erase(c->orders, o);
            if (sl_move(levels, price, -(int64_t)shares, -1) < 0) return -1;
        } else {
            uint64_t mixed = mix_order(op->ref, name_hash, o->side, price, op->shares);
            o->shares = op->shares;
            c->orders_digest += mixed;
            c->digest += mixed;
            if (sl_move(levels, price, (int64_t)op->shares - shares, 0) < 0) return -1;
        }
    }
    return 0;
}

/* The symbol's name, price levels of the message's side and name hash: 0, STOP_SLOW, or -1. */
static int symbol_parts(MboCtx *c, const Staged *s, PyObject **name, SideLevelsObject **levels, uint64_t *hash) {
    if ((Py_ssize_t)s->symbol >= PyList_GET_SIZE(c->names) || (Py_ssize_t)s->symbol >= PyList_GET_SIZE(c->sides) ||
        (Py_ssize_t)s->symbol >= PyList_GET_SIZE(c->name_hashes))
        return STOP_SLOW;
    *name = PyList_GET_ITEM(c->names, s->symbol);
    PyObject *pair = PyList_GET_ITEM(c->sides, s->symbol);
    if (!PyUnicode_Check(*name) || !PyTuple_Check(pair) || PyTuple_GET_SIZE(pair) != 2) return STOP_SLOW;
    PyObject *side = PyTuple_GET_ITEM(pair, s->side == ITCH_BID ? 0 : 1);
    if (!Py_IS_TYPE(side, &SideLevelsType) || (s->side != ITCH_BID && s->side != ITCH_ASK)) return STOP_SLOW;
    *levels = (SideLevelsObject *)side;
    *hash = PyLong_AsUnsignedLongLong(PyList_GET_ITEM(c->name_hashes, s->symbol));
    if (*hash == (unsigned long long)-1 && PyErr_Occurred()) {
        PyErr_Clear();
        return STOP_SLOW;
    }
    return 0;
}

/* Encode the message's block into c->blocks (after a reserved header): 0, STOP_SLOW, STOP_ROOM, or -1. */
static int mbo_block(MboCtx *c, const Staged *s, PyObject *name, const SymRec *t, const ShownLevel *before,
                     Py_ssize_t n_before, const ShownLevel *after, Py_ssize_t n_after, ShownLevel *scratch,
                     const Buf *orders) {
    Buf *b = &c->blocks;
    size_t block_start = b->len;
    if (buf_reserve(b, BLOCK_OVERHEAD) < 0) return -1;
    b->len += BLOCK_OVERHEAD;
    Py_ssize_t name_len;
    const char *utf8 = PyUnicode_AsUTF8AndSize(name, &name_len);
    if (utf8 == NULL) return -1;
    if (w_varint(b, FH_MARKETUPDATE_EVENT_TIME_NS_TAG, (uint64_t)s->m.ns) < 0 ||
        w_varint(b, FH_MARKETUPDATE_PUBLISH_TIME_NS_TAG, (uint64_t)c->publish_ns) < 0)
        return -1;
    size_t start = b->len;
    if (name_len) {
        size_t at = b->len;
        if (w_raw(b, utf8, (size_t)name_len) < 0 || w_close(b, at, FH_SYMBOLUPDATE_SYMBOL_TAG) < 0) return -1;
    }
    if (s->has_trade &&
        w_trade_of(b, (double)s->trade_price / PRICE_SCALE, s->trade_shares, (double)s->trade_shares) < 0)
        return -1;
    if (w_changes(b, before, n_before, after, n_after, s->side, scratch) < 0 ||
        w_rec_state(b, t, FH_SYMBOLUPDATE_STATE_TAG, (uint64_t)c->depth, (uint64_t)c->depth, NULL, 0) < 0)
        return -1;
    if (orders->len) {
        size_t at = b->len;
        if (w_raw(b, orders->data, orders->len) < 0 || w_close(b, at, FH_SYMBOLUPDATE_ORDERS_TAG) < 0) return -1;
    }
    if (w_close(b, start, FH_MARKETUPDATE_SYMBOLS_TAG) < 0) return -1;
    size_t payload_len = b->len - block_start - BLOCK_OVERHEAD;
    long long block = BLOCK_OVERHEAD + (long long)payload_len;
    if (payload_len > MAX_PAYLOAD) {
        b->len = block_start;
        return STOP_SLOW;
    }
    if (block > c->room && !(c->empty_packet && c->count == 0)) {
        b->len = block_start;
        return STOP_ROOM;
    }
    c->room -= block;
    uint8_t *h = b->data + block_start;
    put_block_header(h, payload_len, c->source_stream, s->m.seq);
    if (keep_payload(c->payloads, h, payload_len) < 0) return -1;
    return 0;
}

/* itch50_state._execute on a record's values (the doubles Python's arithmetic gives for the
 * record's exact types): 0, or STOP_SLOW (the volume's overflow, which Python quarantines, or
 * arithmetic the doubles here could round otherwise than Python's integers). */
static int rec_execute(SymRec *t, uint32_t price_units, uint32_t shares) {
    if (t->trades == LLONG_MAX) return STOP_SLOW;
    double price = (double)price_units / PRICE_SCALE;
    double volume = ((t->session_set & 1) ? t->session[0] : 0.0) + (double)shares;
    double notional = t->b_notional + (double)((uint64_t)price_units * shares);
    double traded = t->b_traded + (double)shares;
    if (!(volume < 9223372036854775808.0) || !isfinite(notional)) return STOP_SLOW; /* overflow: Python names it */
    int new_vwap = traded != 0.0;
    double vwap = 0.0;
    if (new_vwap) { /* int(notional) / (int(traded) * 10000), correctly rounded when both are exact doubles */
        double whole = trunc(traded) * PRICE_SCALE;
        if (!(whole > 0.0 && whole < 9007199254740992.0)) return STOP_SLOW;
        vwap = trunc(notional) / whole;
    }
    /* session: 0 volume, 1 last, 2 high, 3 low, 8 vwap (SESSION_NAMES) */
    t->session[1] = price;
    if (!(t->session_set & 4) || price > t->session[2]) t->session[2] = price;
    if (!(t->session_set & 8) || price < t->session[3]) t->session[3] = price;
    t->session[0] = volume;
    t->session_set |= 1 | 2 | 4 | 8;
    if (new_vwap) {
        t->session[8] = vwap;
        t->session_set |= 1u << 8;
    }
    t->b_notional = notional;
    t->b_traded = traded;
    t->trades += 1;
    t->volume = (int64_t)volume;
    t->high = t->session[2];
    t->low = t->session[3];
    t->last = t->session[1];
    t->vwap = ((t->session_set >> 8) & 1) && t->session[8] != 0.0 ? t->session[8] : 0.0; /* book.vwap or 0.0 */
    t->trade_count = t->trades;
    t->notional = notional / PRICE_SCALE;
    return 0;
}

/* The values a message starts from (MboState._values_of): the record's, or a new symbol's
 * (no record: SymbolValues(book=BookValues())); a record without a book gets an empty one.
 * STOP_SLOW when Python's object, not the record, holds the values. */
static int rec_start(MboCtx *c, PyObject *name, SymRec **rec, SymRec *t) {
    *rec = map_find(c->map, name);
    if (*rec == NULL && PyErr_Occurred()) return -1;
    if (*rec != NULL && !(*rec)->native) return STOP_SLOW;
    if (*rec != NULL) {
        *t = **rec;
    } else {
        memset(t, 0, sizeof *t);
        t->native = 1;
    }
    if (!t->has_book) {
        t->has_book = 1;
        t->level_indexed = 0;
        t->session_set = 0;
        t->b_notional = t->b_traded = 0.0;
        t->trades = 0;
        t->n_side[0] = t->n_side[1] = 0;
    }
    return 0;
}

/* The tail every message shares: the orders it touches, its block, its hash, then the commit --
 * the record made first (it can fail), then the orders, then the values. 0, a STOP_* with
 * nothing changed, or -1. ``levels`` is NULL for a message that moves no order; ``moved`` is
 * the side (0 bids, 1 asks) whose shown levels ``t`` holds in scratch, or -1. */
static int mbo_finish(MboCtx *c, const Staged *s, PyObject *name, SymRec *rec, const SymRec *t, int moved,
                      const ShownLevel *before, Py_ssize_t n_before, ShownLevel *scratch, SideLevelsObject *levels,
                      uint64_t name_hash) {
    Buf orders = {0};
    int rc = 0;
    for (int i = 0; i < s->n_ops && rc == 0; i++) { /* the orders it touches, after it (MboState.touched) */
        const OrderOp *op = &s->ops[i];
        const Order *o = op->kind == OP_ADD_ORDER ? NULL : ot_find(c->orders, op->ref);
        if (op->kind != OP_ADD_ORDER && o == NULL) { /* staged from this table a moment ago */
            rc = STOP_SLOW;
            break;
        }
        rc = op->kind == OP_ADD_ORDER ? order_record(&orders, op->ref, op->side, op->price, op->shares)
                                      : order_record(&orders, op->ref, o->side, o->price,
                                                     op->kind == OP_REMOVE_ORDER ? 0 : op->shares);
    }
    const ShownLevel *after = moved >= 0 ? t->side[moved] : NULL;
    Py_ssize_t n_after = moved >= 0 ? t->n_side[moved] : 0;
    if (rc == 0 && c->publish)
        rc = mbo_block(c, s, name, t, before, moved >= 0 ? n_before : 0, after, n_after, scratch, &orders);
    PyMem_Free(orders.data);
    uint64_t new_hash, old_hash = rec != NULL ? rec->hash : 0;
    if (rc != 0 || rec_digest(name, t, &new_hash) < 0) return rc != 0 ? rc : -1;
    if ((rec == NULL && (rec = map_insert(c->map, name)) == NULL) || (moved >= 0 && rec_side_room(rec, moved, n_after) < 0))
        return -1; /* an empty record for a new symbol: not native, nothing the run or Python reads yet */
    if (mbo_commit_ops(c, s, levels, name_hash) < 0) return -1;
    PyObject *key = rec->name, *obj = rec->obj;
    ShownLevel *sides[2] = {rec->side[0], rec->side[1]};
    Py_ssize_t caps[2] = {rec->cap_side[0], rec->cap_side[1]};
    *rec = *t;
    for (int k = 0; k < 2; k++) { /* the record keeps its arrays (the other side: its own levels) */
        rec->side[k] = sides[k];
        rec->cap_side[k] = caps[k];
    }
    if (n_after) memcpy(rec->side[moved], after, (size_t)n_after * sizeof(ShownLevel));
    rec->name = key;
    rec->obj = NULL;
    rec->hash = new_hash;
    Py_XDECREF(obj); /* the values Python read before: built again when asked */
    c->digest += new_hash - old_hash;
    return 0;
}

/* One message that moves a live order (A F E C X D U), staged, encoded and committed: 0, a
 * STOP_* with nothing changed, or -1. */
static int mbo_message(MboCtx *c, Staged *s) {
    int rc;
    if (s->m.kind == 'A' || s->m.kind == 'F') {
        if (s->m.side != 'B' && s->m.side != 'S') return STOP_SLOW;
        if ((rc = stock_symbol(c, s->m.stock, &s->symbol)) != 0) return rc;
    }
    if ((rc = stage_orders(c, s)) != 0) return rc;
    PyObject *name;
    SideLevelsObject *levels;
    uint64_t name_hash;
    SymRec *rec, t;
    if ((rc = symbol_parts(c, s, &name, &levels, &name_hash)) != 0 || (rc = rec_start(c, name, &rec, &t)) != 0)
        return rc;
    int moved = s->side == ITCH_BID ? 0 : 1;
    size_t room = sl_best_room(levels, c->depth, s->n_moves);
    Shown *shown = PyMem_Malloc(room * sizeof(Shown));
    ShownLevel *lv = PyMem_Malloc((size_t)(3 * (c->depth + 1)) * sizeof(ShownLevel));
    if (shown == NULL || lv == NULL) {
        PyMem_Free(shown);
        PyMem_Free(lv);
        PyErr_NoMemory();
        return -1;
    }
    ShownLevel *after = lv, *scratch = lv + c->depth + 1;
    Py_ssize_t n_before = t.n_side[moved] < c->depth ? t.n_side[moved] : c->depth;
    Py_ssize_t n_after = sl_best(levels, c->depth, s->moves, s->n_moves, shown);
    for (Py_ssize_t i = 0; i < n_after; i++) /* (price / 10,000, float(size), orders), as the reference shows */
        after[i] = (ShownLevel){(double)shown[i].price / PRICE_SCALE, (double)shown[i].size, shown[i].count};
    const ShownLevel *before = t.side[moved];
    t.side[moved] = after;
    t.n_side[moved] = n_after;
    rc = s->has_trade ? rec_execute(&t, s->trade_price, s->trade_shares) : 0;
    if (rc == 0) {
        t.bid = t.n_side[0] ? t.side[0][0].price : 0.0; /* book.best(side) */
        t.ask = t.n_side[1] ? t.side[1][0].price : 0.0;
        rc = mbo_finish(c, s, name, rec, &t, moved, before, n_before, scratch, levels, name_hash);
    }
    PyMem_Free(shown);
    PyMem_Free(lv);
    return rc;
}

/* A P, Q or R message of a symbol the state knows (itch50_state.MboState.stage's "P Q R" case):
 * no order moves and the shown book stays; P and Q execute (volume, last, high, low, VWAP; bid
 * and ask stay as they were). 0, a STOP_* with nothing changed, or -1. */
static int mbo_symbol_message(MboCtx *c, Staged *s) {
    int rc = stock_symbol(c, s->m.stock, &s->symbol);
    if (rc != 0) return rc;
    if ((Py_ssize_t)s->symbol >= PyList_GET_SIZE(c->names) || !PyUnicode_Check(PyList_GET_ITEM(c->names, s->symbol)))
        return STOP_SLOW;
    PyObject *name = PyList_GET_ITEM(c->names, s->symbol);
    SymRec *rec, t;
    if ((rc = rec_start(c, name, &rec, &t)) != 0) return rc;
    s->has_trade = s->m.kind != 'R';
    s->trade_price = s->m.price;
    s->trade_shares = s->m.shares;
    if (s->has_trade && (rc = rec_execute(&t, s->trade_price, s->trade_shares)) != 0) return rc;
    return mbo_finish(c, s, name, rec, &t, -1, NULL, 0, NULL, NULL, 0);
}

/* Messages from *pos until one stops the run: why (STOP_*), or -1 with an exception. */
static int mbo_messages(MboCtx *c, const uint8_t *buf, Py_ssize_t end, Py_ssize_t *pos) {
    while (*pos < end) {
        if (c->count >= c->max_count) return STOP_COUNT;
        /* moldudp64.next_record: a u32 length, then the u64 source_seq and the message */
        if (end - *pos < 12) return STOP_SLOW;
        size_t length = (size_t)rd_be(buf + *pos, 4);
        if (length < 8 || length > (size_t)(end - *pos - 4)) return STOP_SLOW;
        Py_ssize_t after = *pos + 4 + (Py_ssize_t)length;
        Staged s;
        memset(&s, 0, sizeof s);
        if (itch_take(buf + *pos + 4, length, &s.m) < 0) return STOP_SLOW;
        if (c->expect_seq && (long long)s.m.seq != c->expect_seq) return STOP_SLOW;
        if (c->stop_seq && (long long)s.m.seq >= c->stop_seq) return STOP_SLOW; /* seq <= MAX_SOURCE_SEQ */
        int symbol_only = s.m.kind == 'P' || s.m.kind == 'Q' || s.m.kind == 'R';
        int rc = symbol_only ? mbo_symbol_message(c, &s) : mbo_message(c, &s);
        if (rc != 0) return rc;
        if (buf_reserve(&c->digests, 8) < 0) return -1;
        memcpy(c->digests.data + c->digests.len, &c->digest, 8);
        c->digests.len += 8;
        if (c->count == 0) c->first_seq = (long long)s.m.seq;
        c->count++;
        c->expect_seq = (long long)s.m.seq + 1;
        *pos = after;
    }
    return STOP_END;
}

static PyObject *owned_attr(PyObject *obj, PyObject *name, PyTypeObject *type) {
    PyObject *value = PyObject_GetAttr(obj, name);
    if (value != NULL && !Py_IS_TYPE(value, type)) {
        PyErr_Format(PyExc_TypeError, "the state's %U is a %.100s, not a %.100s", name, Py_TYPE(value)->tp_name,
                     type->tp_name);
        Py_CLEAR(value);
    }
    return value;
}

static int u64_attr(PyObject *obj, PyObject *name, uint64_t *out) {
    PyObject *value = PyObject_GetAttr(obj, name);
    if (value == NULL) return -1;
    int rc = as_u64(value, out);
    Py_DECREF(value);
    return rc;
}

static int set_u64_attr(PyObject *obj, PyObject *name, uint64_t v) {
    PyObject *value = PyLong_FromUnsignedLongLong(v);
    int rc = value == NULL ? -1 : PyObject_SetAttr(obj, name, value);
    Py_XDECREF(value);
    return rc;
}

PyDoc_STRVAR(MboRun_run_doc,
             "run(frame, pos, expect_seq, stop_seq, room, max_count, publish_time_ns, source_stream, publish,\n"
             "    want_payloads) -> (pos, count, stop, blocks, first_source_seq, digests, payloads)\n\n"
             "engine.ConversionEngine.run over a record frame of MoldUDP64 messages: the A F E C X D U\n"
             "P Q R messages in C, stopping (1, the Python path) at anything else.");

/* The state's book depth: 0, or -1 with an exception (not a u64, or too deep). */
static int depth_attr(PyObject *state, Py_ssize_t *out) {
    uint64_t depth;
    if (u64_attr(state, N_DEPTH, &depth) < 0) return -1;
    if (depth > 1000000) {
        PyErr_Format(PyExc_ValueError, "book depth %llu is too deep", (unsigned long long)depth);
        return -1;
    }
    *out = (Py_ssize_t)depth;
    return 0;
}

static PyObject *MboRun_run(MboRunObject *self, PyObject *args) {
    Py_buffer frame;
    Py_ssize_t pos;
    int want_payloads;
    MboCtx c = {0};
    if (!PyArg_ParseTuple(args, "y*nLLLnLipp", &frame, &pos, &c.expect_seq, &c.stop_seq, &c.room, &c.max_count,
                          &c.publish_ns, &c.source_stream, &c.publish, &want_payloads))
        return NULL;
    c.empty_packet = c.room < 0;
    if (c.empty_packet) c.room = -c.room;
    PyObject *result = NULL, *state = self->state;
    int loaded = 0;
    if (pos < 0 || pos > frame.len || c.source_stream < 0 || c.source_stream > 0xFFFF) {
        PyErr_SetString(PyExc_ValueError, "pos or source_stream out of range");
        goto done;
    }
    c.orders = (OrderTableObject *)owned_attr(state, N_ORDERS, &OrderTableType);
    if (c.orders == NULL || (c.index = owned_attr(state, N_INDEX, &PyDict_Type)) == NULL ||
        (c.names = owned_attr(state, N_NAMES, &PyList_Type)) == NULL ||
        (c.sides = owned_attr(state, N_SIDES, &PyList_Type)) == NULL ||
        (c.name_hashes = owned_attr(state, N_NAME_HASHES, &PyList_Type)) == NULL ||
        (c.map = (SymbolMapObject *)owned_attr(state, N_VALUES, &SymbolMapType)) == NULL ||
        u64_attr(state, N_DIGEST, &c.digest) < 0 ||
        u64_attr(state, N_ORDERS_DIGEST, &c.orders_digest) < 0 || u64_attr(state, N_MAX_ORDERS, &c.max_orders) < 0 ||
        depth_attr(state, &c.depth) < 0)
        goto done;
    loaded = 1;
    if (want_payloads && (c.payloads = PyList_New(0)) == NULL) goto done;
    int stop = mbo_messages(&c, frame.buf, frame.len, &pos);
    if (stop < 0) goto done;
    result = run_result(pos, c.count, stop, &c.blocks, c.first_seq, &c.digests, c.payloads);
done:
    /* What was committed stays committed, whatever stopped the run: the digests go back to the state. */
    if (loaded && (set_u64_attr(state, N_DIGEST, c.digest) < 0 || set_u64_attr(state, N_ORDERS_DIGEST, c.orders_digest) < 0))
        Py_CLEAR(result);
    Py_XDECREF(c.orders);
    Py_XDECREF(c.index);
    Py_XDECREF(c.names);
    Py_XDECREF(c.sides);
    Py_XDECREF(c.name_hashes);
    Py_XDECREF(c.map);
    Py_XDECREF(c.payloads);
    PyMem_Free(c.blocks.data);
    PyMem_Free(c.digests.data);
    PyBuffer_Release(&frame);
    return result;
}

/* ---- records(packet): a MoldUDP64 packet's record frame (proto/moldudp64.py decode_packet, records_of) ---- */

#define MOLD_HEADER 20             /* session (10 bytes), sequence (u64), count (u16) */
#define MOLD_END_OF_SESSION 0xFFFF /* a count that says the session ended: no message */

PyDoc_STRVAR(MboRun_records_doc,
             "records(packet) -> (record_frame, count, trailing) or None\n\n"
             "proto.moldudp64.records_of(decode_packet(packet)) and the packet's count and trailing\n"
             "bytes, in C; None for a packet shorter than its header (decode_packet's PacketError).");

/* The packet's messages as decode_packet cuts them (a length past the end: the message to the
 * end; a lone byte where a length should be: itself), each as a record (u32 length, the u64
 * sequence number capped at 2**64 - 1, the message). */
static PyObject *MboRun_records(PyObject *Py_UNUSED(self), PyObject *arg) {
    Py_buffer in;
    if (PyObject_GetBuffer(arg, &in, PyBUF_SIMPLE) < 0) return NULL;
    const uint8_t *data = in.buf;
    Py_ssize_t end = in.len, pos = MOLD_HEADER;
    PyObject *result = NULL;
    if (end < MOLD_HEADER) {
        result = Py_NewRef(Py_None);
        goto done;
    }
    uint64_t sequence = rd_be(data + 10, 8);
    unsigned count = (unsigned)rd_be(data + 18, 2), wanted = count == MOLD_END_OF_SESSION ? 0 : count, got = 0;
    Buf out = {0};
    while (got < wanted && pos < end) {
        Py_ssize_t start = pos + 2, length = end - pos < 2 ? end - pos : (Py_ssize_t)rd_be(data + pos, 2);
        if (end - pos < 2) start = pos; /* the rest, where a length should be */
        if (length > end - start) length = end - start;
        uint64_t seq = sequence > UINT64_MAX - got ? UINT64_MAX : sequence + got;
        if (buf_reserve(&out, 12 + (size_t)length) < 0) {
            PyMem_Free(out.data);
            goto done;
        }
        uint8_t *p = out.data + out.len;
        for (int i = 0; i < 4; i++) p[i] = (uint8_t)((uint64_t)(8 + length) >> (24 - 8 * i));
        put_be64(p + 4, seq);
        memcpy(p + 12, data + start, (size_t)length);
        out.len += 12 + (size_t)length;
        got++;
        pos = start + length;
    }
    result = Py_BuildValue("(y#In)", out.data ? (const char *)out.data : "", (Py_ssize_t)out.len, count, end - pos);
    PyMem_Free(out.data);
done:
    PyBuffer_Release(&in);
    return result;
}

/* ---- checkpoint_symbols(): MboState.snapshot() written as a ConversionSnapshot's symbols ---- */

#define SNAPSHOT_SYMBOLS_TAG 0x22 /* sync.proto ConversionSnapshot.symbols = 4 */
#define SNAPSHOT_SYMBOL_TAG 0x0a  /* SymbolSnapshot.symbol = 1 */
#define SNAPSHOT_STATE_TAG 0x12   /* SymbolSnapshot.state = 2 */

/* Every live order of the table (ot_next: no Python object), by symbol, then reference: the
 * order MboState.snapshot's sorted() packs them in (a record starts with its big-endian
 * reference, and a reference is live once). *n: how many. NULL with an exception. */
static LiveOrder *live_orders(OrderTableObject *table, size_t *n) {
    LiveOrder *out = PyMem_Malloc((table->count ? table->count : 1) * sizeof(LiveOrder));
    if (out == NULL) return (LiveOrder *)PyErr_NoMemory();
    size_t pos = 0;
    const Order *o;
    *n = 0;
    while (*n < table->count && (o = ot_next(table, &pos)) != NULL)
        out[(*n)++] = (LiveOrder){o->ref, o->symbol, o->price, o->shares, o->side};
    qsort(out, *n, sizeof *out, live_order_cmp);
    return out;
}

/* Book {level_indexed, bids, asks, orders} as codec.fill_book writes a snapshot's (every level,
 * depth 0), then SessionValues. */
static int w_snapshot_book(Buf *b, const NewValues *n, const LiveOrder *orders, size_t n_orders) {
    size_t start = b->len;
    int truth = PyObject_IsTrue(n->k[0]);
    if (truth < 0 || w_varint(b, FH_BOOK_LEVEL_INDEXED_TAG, (uint64_t)truth) < 0 ||
        w_levels(b, n->k[1], FH_BOOK_BIDS_TAG, UINT64_MAX) < 0 || w_levels(b, n->k[2], FH_BOOK_ASKS_TAG, UINT64_MAX) < 0)
        return -1;
    if (n_orders) {
        size_t at = b->len;
        for (size_t i = 0; i < n_orders; i++) {
            if (order_record(b, orders[i].ref, orders[i].side, orders[i].price, orders[i].shares) < 0) return -1;
        }
        if (w_close(b, at, FH_BOOK_ORDERS_TAG) < 0) return -1;
    }
    return (w_close(b, start, FH_SYMBOLSTATE_BOOK_TAG) < 0 || w_session(b, n) < 0) ? -1 : 0;
}

/* One SymbolSnapshot {symbol, state} as ConversionSnapshot.symbols: the values as the snapshot
 * copies them (no book: an empty one), with the symbol's live orders. */
static int w_snapshot_symbol(RunObject *self, Buf *b, PyObject *name, PyObject *values, const LiveOrder *orders,
                             size_t n_orders) {
    static const uint8_t tags[9] = {FH_SYMBOLSTATE_VOLUME_TAG, FH_SYMBOLSTATE_HIGH_TAG,  FH_SYMBOLSTATE_LOW_TAG,
                                    FH_SYMBOLSTATE_LAST_TAG,   FH_SYMBOLSTATE_VWAP_TAG,  FH_SYMBOLSTATE_TRADE_COUNT_TAG,
                                    FH_SYMBOLSTATE_BID_TAG,    FH_SYMBOLSTATE_ASK_TAG,   FH_SYMBOLSTATE_NOTIONAL_TAG};
    Py_ssize_t name_len;
    const char *utf8 = PyUnicode_AsUTF8AndSize(name, &name_len);
    NewValues n = {0};
    int rc = (utf8 == NULL || load_values(self, values, &n) < 0) ? -1 : 0;
    size_t entry = b->len, at = b->len;
    if (rc == 0 && name_len)
        rc = (w_raw(b, utf8, (size_t)name_len) < 0 || w_close(b, at, SNAPSHOT_SYMBOL_TAG) < 0) ? -1 : 0;
    size_t state = b->len;
    for (int i = 0; i < 9 && rc == 0; i++)
        rc = (i == 0 || i == 5) ? w_obj_i64(b, n.v[i], tags[i]) : w_obj_double(b, n.v[i], tags[i], 0);
    if (rc == 0)
        rc = (w_snapshot_book(b, &n, orders, n_orders) < 0 || w_close(b, state, SNAPSHOT_STATE_TAG) < 0 ||
              w_close(b, entry, SNAPSHOT_SYMBOLS_TAG) < 0)
                 ? -1
                 : 0;
    new_values_clear(&n);
    return rc;
}

PyDoc_STRVAR(MboRun_checkpoint_symbols_doc,
             "checkpoint_symbols() -> bytes\n\n"
             "Every symbol of the state as MboState.snapshot() gives it (its values, its book with its live\n"
             "orders packed by reference), written as sync.proto ConversionSnapshot.symbols fields: what\n"
             "recovery.encode_checkpoint_state writes for that snapshot, byte for byte.");

/* The live orders of symbol index ``wanted`` (-1: none) in the sorted array: where they start, how many. */
static size_t orders_of(const LiveOrder *orders, size_t n_orders, long long wanted, size_t *first) {
    size_t lo = 0, hi = n_orders, last;
    while (wanted >= 0 && lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if ((long long)orders[mid].symbol < wanted) lo = mid + 1;
        else hi = mid;
    }
    *first = lo;
    for (last = lo; wanted >= 0 && last < n_orders && (long long)orders[last].symbol == wanted; last++) {}
    return wanted >= 0 ? last - lo : 0;
}

/* One symbol of the map as a SymbolSnapshot: from its record, or (not native) from Python's object. */
static int w_map_symbol(RunObject *self, Buf *b, SymRec *r, const LiveOrder *orders, size_t n_orders) {
    if (!r->native) return w_snapshot_symbol(self, b, r->name, r->obj, orders, n_orders);
    SymRec t = *r;
    if (!t.has_book) { /* snapshot(): an empty book where the values have none */
        t.has_book = 1;
        t.level_indexed = 0;
        t.session_set = 0;
        t.b_notional = t.b_traded = 0.0;
        t.trades = 0;
        t.n_side[0] = t.n_side[1] = 0;
    }
    Py_ssize_t name_len;
    const char *utf8 = PyUnicode_AsUTF8AndSize(r->name, &name_len);
    size_t entry = b->len, at = b->len;
    if (utf8 == NULL || (name_len && (w_raw(b, utf8, (size_t)name_len) < 0 || w_close(b, at, SNAPSHOT_SYMBOL_TAG) < 0)))
        return -1;
    if (w_rec_state(b, &t, SNAPSHOT_STATE_TAG, 0, UINT64_MAX, orders, n_orders) < 0) return -1;
    return w_close(b, entry, SNAPSHOT_SYMBOLS_TAG);
}

static PyObject *MboRun_checkpoint_symbols(RunObject *self, PyObject *Py_UNUSED(ignored)) {
    PyObject *table = owned_attr(self->state, N_ORDERS, &OrderTableType), *index = NULL, *out = NULL;
    SymbolMapObject *map = table == NULL ? NULL : (SymbolMapObject *)owned_attr(self->state, N_VALUES, &SymbolMapType);
    size_t n_orders = 0;
    LiveOrder *orders = NULL;
    Buf b = {0};
    if (map == NULL || (index = owned_attr(self->state, N_INDEX, &PyDict_Type)) == NULL ||
        (orders = live_orders((OrderTableObject *)table, &n_orders)) == NULL)
        goto done;
    for (Py_ssize_t i = 0; i < map->n; i++) { /* no Python code runs: the map keeps its records */
        SymRec *r = &map->recs[i];
        PyObject *symbol = PyDict_GetItemWithError(index, r->name);
        long long wanted = symbol != NULL && PyLong_Check(symbol) ? PyLong_AsLongLong(symbol) : -1;
        if (PyErr_Occurred()) goto done;
        size_t first, n = orders_of(orders, n_orders, wanted, &first);
        if (w_map_symbol(self, &b, r, orders + first, n) < 0) goto done;
    }
    out = PyBytes_FromStringAndSize(b.data ? (const char *)b.data : "", (Py_ssize_t)b.len);
done:
    PyMem_Free(b.data);
    PyMem_Free(orders);
    Py_XDECREF(index);
    Py_XDECREF((PyObject *)map);
    Py_XDECREF(table);
    return out;
}

PyDoc_STRVAR(MboRun_symbol_map_doc,
             "symbol_map(values_type, book_type) -> SymbolMap: an empty map of symbols' values in C records\n"
             "(MboState._values where the extension is built).");

static PyObject *MboRun_symbol_map(PyObject *Py_UNUSED(cls), PyObject *args) {
    if (PyType_Ready(&SymbolMapType) < 0) return NULL;
    return SymbolMap_new(&SymbolMapType, args, NULL);
}

static PyObject *MboRun_new(PyTypeObject *type, PyObject *args, PyObject *kwds) {
    static char *kwlist[] = {"state", "values_type", "book_type", NULL};
    PyObject *state, *values_type, *book_type;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "OOO:MboRun", kwlist, &state, &values_type, &book_type)) return NULL;
    if (!PyCallable_Check(values_type) || !PyCallable_Check(book_type)) {
        PyErr_SetString(PyExc_TypeError, "values_type and book_type must be callable (SymbolValues, BookValues)");
        return NULL;
    }
    return run_object(type, state, values_type, book_type);
}

static PyMethodDef MboRun_methods[] = {
    {"run", (PyCFunction)MboRun_run, METH_VARARGS, MboRun_run_doc},
    {"records", (PyCFunction)MboRun_records, METH_O, MboRun_records_doc},
    {"checkpoint_symbols", (PyCFunction)MboRun_checkpoint_symbols, METH_NOARGS, MboRun_checkpoint_symbols_doc},
    {"symbol_map", (PyCFunction)MboRun_symbol_map, METH_VARARGS | METH_STATIC, MboRun_symbol_map_doc},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject MboRunType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "feedha.adapter.conversion._orders.MboRun",
    .tp_basicsize = sizeof(RunObject),
    .tp_dealloc = (destructor)run_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "MboRun(state, values_type, book_type): itch50 runs of A F E C X D U P Q R in C over an MboState.",
    .tp_new = MboRun_new,
    .tp_methods = MboRun_methods,
};
