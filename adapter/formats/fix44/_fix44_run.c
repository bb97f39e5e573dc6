/*
 * fix44's Fix44Run: a part of the _orders extension. adapter/conversion/_orders.c
 * includes it after what the formats share (one translation unit: it is not compiled on its own).
 */

/* ---- Fix44Run: a run of fix44 35=X and 35=W converted whole in C ----
 *
 * Fix44Run(table, max_prices, rules).run(...) is Fix44Engine.run over the state's records in C
 * (BookTable, above). The reference is the Python loop
 * (conversion/_reference.LoopEngine.run over fix44/parser.Fix44Converter.parse,
 * book_state.BookState.stage/commit and Fix44Engine.encode_staged), and this does what it
 * does: the book rules applied to the records in place (each change logged so a message that
 * stops after it applied is undone exactly: FxUndo; a 35=W builds both sides anew and keeps the
 * record's own until the commit: FxSym.saved; an X entry of the other kind switches its book's
 * kind, both sides built anew and logged: fx_switch), a new symbol's record made here, each touched
 * side's hash kept, the shown changes, the block, the symbol's digest and the commit.
 * Its blocks are fix44_wire's: each book cut to its best ``depth`` levels a side and, for a
 * price-keyed book, SymbolUpdate.levels with each price the message named (fx_price_levels; a
 * new or refreshed book's every price and book_replaced), so a block's size follows the message.
 *
 * Taken here, strictly: a frame whose 9= and 10= check as proto.fix.next_message checks them;
 * 35=X or 35=W first; then the header and body fields the dictionary gives the message, each at
 * most once, in any order; then 268 and its entries, each opening with the group's delimiter
 * (279 in an X: 0 New, 1 Change, 2 Delete; 269 in a W) and carrying the group's fields, each at
 * most once: 269 (the dictionary's types; those that are no bid, offer, trade or session value
 * change nothing), 55 (X: or the previous entry's symbol; W: the body's; or 48 with its 22
 * through the engine's security table, ``securities``: fx_security), 270, 271, 1023, 346 and
 * the rest, each checked as its type checks it (``rules``: the packaged dictionary's, from
 * fix44/native.py fix44_rules). A tag the dictionary does not define for the message is skipped,
 * as the parser skips it. Values are checked on a narrower syntax than the dictionary's (plain
 * digits, printable ASCII text, a timestamp of a year 1970-2200). Anything else stops the run
 * (STOP_SLOW) before anything changes and the Python path takes that message: every other
 * message type (session messages: skipped and counted there), a repeated or misplaced tag, odd
 * number syntax, a security the table does not hold, a symbol past max_symbols (symbol_limit), a
 * symbol adopted without a book, a full side (book_full), an insert into a level-indexed side deeper than the depth, a volume or
 * trade count leaving int64, more than 64 entries or 16 symbols in a message
 * (tests/unit/adapter/test_fix44_run.py, test_fix44_run_refresh.py and
 * test_fix44_native_state.py compare the two).
 */

#define FX_MAX_ENTRIES 64
#define FX_MAX_SYMBOLS 16
#define FX_SOH 1

#define FX_MAX_FIELDS 48 /* the most header and body fields, or fields of one entry, a message has here */
#define FX_RULE_TAGS 4096 /* the tags the rules name: every tag the dictionary defines is below (native.py) */
#define FX_KIND_X 0
#define FX_KIND_W 1

/* A tag's role in a message kind, and its value's type: the packaged dictionary's, handed in
 * by adapter/formats/fix44/native.py (fix44_rules) when the run is made. */
enum { FX_ROLE_IGNORED = 0, FX_ROLE_HEAD, FX_ROLE_ENTRY, FX_ROLE_STOP };
enum { FX_T_NONE = 0, FX_T_INT, FX_T_SEQNUM, FX_T_PRICE, FX_T_QTY, FX_T_CHAR, FX_T_STRING, FX_T_TIMESTAMP, FX_T_TIME, FX_T_DATE };

typedef struct {
    uint8_t role[2][FX_RULE_TAGS]; /* FX_ROLE_* in a 35=X, a 35=W */
    uint8_t type[FX_RULE_TAGS];    /* FX_T_* */
    uint64_t chars[FX_RULE_TAGS][2]; /* a char field's values: a bit per ASCII code */
} FxRules;

typedef struct {
    PyObject_HEAD
    BookTableObject *table;
    Py_ssize_t max_prices; /* book.MAX_PRICES */
    FxRules *rules;
    PyObject *securities; /* a copy of the engine's security table, or NULL */
    /* What a call writes into, kept from one call to the next (Fix44Run_run): a run's blocks
     * grew its buffer from nothing, and copied it at each doubling, at every call. */
    Buf blocks, digests;
    void *pool; /* FxCtx.pool */
    size_t pool_cap;
    int busy; /* a call is using them (a re-entered call makes its own) */
} Fix44RunObject;

/* One entry of the 268 group (BookEntry). */
typedef struct {
    int action, sym, has_price, has_size, has_level;
    char type;
    double price, size;
    long long level, orders;
} FxEntry;

/* One message as the parser converts it: its seq, event time, entries and symbols. */
typedef struct {
    long long seq;
    int64_t ns;
    int full; /* a 35=W: the book becomes its entries */
    int n_entries, n_symbols;
    FxEntry e[FX_MAX_ENTRIES];
    const uint8_t *sym[FX_MAX_SYMBOLS];
    size_t sym_len[FX_MAX_SYMBOLS];
} FxMsg;

static inline int fx_isdigit(uint8_t ch) { return ch >= '0' && ch <= '9'; }

/* proto.fix.next_message's checks: 0 with the body's bounds and the next position, or STOP_SLOW
 * (anything the Python path must cut or resynchronize over). */
static int fx_frame(const uint8_t *buf, Py_ssize_t pos, Py_ssize_t end, Py_ssize_t *body, Py_ssize_t *body_end,
                    Py_ssize_t *after) {
    if (end - pos < 5 || memcmp(buf + pos, "8=FIX", 5) != 0) return STOP_SLOW;
    const uint8_t *soh = memchr(buf + pos, FX_SOH, (size_t)(end - pos));
    if (soh == NULL || soh + 3 >= buf + end || soh[1] != '9' || soh[2] != '=') return STOP_SLOW;
    const uint8_t *len_end = memchr(soh + 3, FX_SOH, (size_t)(buf + end - (soh + 3)));
    if (len_end == NULL || len_end - soh > 8 || len_end == soh + 3) return STOP_SLOW;
    Py_ssize_t body_len = 0;
    for (const uint8_t *p = soh + 3; p < len_end; p++) {
        if (!fx_isdigit(*p)) return STOP_SLOW;
        body_len = body_len * 10 + (*p - '0');
    }
    Py_ssize_t start = len_end + 1 - buf, stop = start + body_len, trailer_end = stop + 7;
    if (body_len <= 0 || trailer_end > end || memcmp(buf + stop, "10=", 3) != 0 || buf[trailer_end - 1] != FX_SOH)
        return STOP_SLOW;
    unsigned declared = 0;
    for (int i = 3; i < 6; i++) {
        if (!fx_isdigit(buf[stop + i])) return STOP_SLOW;
        declared = declared * 10 + (unsigned)(buf[stop + i] - '0');
    }
    if (fix_byte_sum(buf + pos, (size_t)(stop - pos)) != declared) return STOP_SLOW;
    *body = start;
    *body_end = stop;
    *after = trailer_end;
    return 0;
}

typedef struct {
    const uint8_t *p, *end;
} FxCursor;

/* The next tag=value field: 1, 0 at the end, -1 when it is not one this path reads (a tag
 * with a leading zero or more than six digits, an empty value). The body ends in SOH. */
static int fx_field(FxCursor *c, int *tag, const uint8_t **value, size_t *len) {
    if (c->p >= c->end) return 0;
    const uint8_t *p = c->p;
    int t = 0, digits = 0;
    if (*p == '0') return -1;
    while (p < c->end && fx_isdigit(*p)) {
        if (++digits > 6) return -1;
        t = t * 10 + (*p++ - '0');
    }
    if (digits == 0 || p >= c->end || *p != '=') return -1;
    const uint8_t *v = ++p, *soh = memchr(p, FX_SOH, (size_t)(c->end - p));
    if (soh == NULL || soh == v) return -1;
    *tag = t;
    *value = v;
    *len = (size_t)(soh - v);
    c->p = soh + 1;
    return 1;
}

/* Plain digits, 1..max of them: 0 and the number, or -1. */
static int fx_digits(const uint8_t *v, size_t n, size_t max, long long *out) {
    if (n == 0 || n > max) return -1;
    long long x = 0;
    for (size_t i = 0; i < n; i++) {
        if (!fx_isdigit(v[i])) return -1;
        x = x * 10 + (v[i] - '0');
    }
    *out = x;
    return 0;
}

/* Text of printable ASCII (a subset of what decodes as UTF-8): 0, or -1. */
static int fx_text(const uint8_t *v, size_t n) {
    for (size_t i = 0; i < n; i++) {
        if (v[i] < 0x20 || v[i] > 0x7E) return -1;
    }
    return n ? 0 : -1;
}

/* fix44_dictionary.decimal_value: -?(\d+(\.\d*)?|\.\d+), at most 40 bytes, the nearest double
 * (Python's own correctly rounded conversion, as float() uses): 0, or -1. */
static int fx_decimal(const uint8_t *v, size_t n, double *out) {
    if (n == 0 || n > 40) return -1;
    size_t i = v[0] == '-', whole = 0, frac = 0;
    while (i < n && fx_isdigit(v[i])) i++, whole++;
    if (i < n && v[i] == '.') {
        for (i++; i < n && fx_isdigit(v[i]); i++) frac++;
    }
    if (i != n || whole + frac == 0) return -1;
    if (whole + frac <= 15) { /* Clinger's fast path: an exact integer over an exact power of ten, */
        static const double pow10[16] = {1e0, 1e1, 1e2,  1e3,  1e4,  1e5,  1e6,  1e7,
                                         1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15};
        uint64_t mantissa = 0; /* one correctly rounded division, as float() rounds */
        for (size_t k = v[0] == '-'; k < n; k++) {
            if (v[k] != '.') mantissa = mantissa * 10 + (uint64_t)(v[k] - '0');
        }
        double d = (double)mantissa / pow10[frac];
        *out = v[0] == '-' ? -d : d;
        return 0;
    }
    char text[48], *stop = NULL;
    memcpy(text, v, n);
    text[n] = 0;
    double d = PyOS_string_to_double(text, &stop, NULL);
    if (d == -1.0 && PyErr_Occurred()) {
        PyErr_Clear();
        return -1;
    }
    if (stop != text + n) return -1;
    *out = d;
    return 0;
}

static int fx_two(const uint8_t *p) { return (p[0] - '0') * 10 + (p[1] - '0'); }

/* Days since 1970-01-01 of a proleptic Gregorian date (calendar.timegm's count). */
static long long fx_days(int y, int m, int d) {
    y -= m <= 2;
    long long era = y / 400; /* y >= 1969 here */
    int yoe = y - (int)era * 400, doy = (153 * (m > 2 ? m - 3 : m + 9) + 2) / 5 + d - 1;
    return era * 146097 + yoe * 365 + yoe / 4 - yoe / 100 + doy - 719468;
}

/* proto.fix.parse_timestamp on YYYYMMDD-HH:MM:SS[.f{1,9}] (year 1970-2200): 0 and ns, or -1. */
static int fx_timestamp(const uint8_t *v, size_t n, int64_t *ns) {
    static const int at[14] = {0, 1, 2, 3, 4, 5, 6, 7, 9, 10, 12, 13, 15, 16};
    if (n < 17 || n == 18 || n > 27 || v[8] != '-' || v[11] != ':' || v[14] != ':') return -1;
    for (int i = 0; i < 14; i++) {
        if (!fx_isdigit(v[at[i]])) return -1;
    }
    int year = fx_two(v) * 100 + fx_two(v + 2), month = fx_two(v + 4), day = fx_two(v + 6);
    int hour = fx_two(v + 9), minute = fx_two(v + 12), second = fx_two(v + 15);
    if (year < 1970 || year > 2200 || month < 1 || month > 12 || day < 1 || day > 31 || hour > 23 || minute > 59 ||
        second > 60)
        return -1;
    long long frac = 0;
    if (n > 17) {
        if (v[17] != '.') return -1;
        for (size_t i = 18; i < 27; i++) {
            if (i < n && !fx_isdigit(v[i])) return -1;
            frac = frac * 10 + (i < n ? v[i] - '0' : 0);
        }
    }
    long long seconds = fx_days(year, month, day) * 86400 + hour * 3600 + minute * 60 + second;
    *ns = (int64_t)(seconds * 1000000000LL + frac);
    return 0;
}

/* UTCTimeOnly (273): \d\d:\d\d:\d\d(\.\d{1,9})?: 0, or -1. */
static int fx_time(const uint8_t *v, size_t n) {
    if (n < 8 || n == 9 || n > 18 || v[2] != ':' || v[5] != ':') return -1;
    for (size_t i = 0; i < n; i++) {
        if (i == 2 || i == 5 || i == 8) {
            if (i == 8 && v[i] != '.') return -1;
        } else if (!fx_isdigit(v[i])) {
            return -1;
        }
    }
    return 0;
}

/* The index of a symbol's name in the message (added when new): the index, or -1. */
static int fx_symbol(FxMsg *m, const uint8_t *v, size_t n) {
    for (int i = 0; i < m->n_symbols; i++) {
        if (m->sym_len[i] == n && memcmp(m->sym[i], v, n) == 0) return i;
    }
    if (m->n_symbols >= FX_MAX_SYMBOLS) return -1;
    m->sym[m->n_symbols] = v;
    m->sym_len[m->n_symbols] = n;
    return m->n_symbols++;
}

/* -?\d{1,18} (the dictionary's int, narrower): 0, or -1. */
static int fx_int(const uint8_t *v, size_t n) {
    long long ignored;
    return n > 1 && v[0] == '-' ? fx_digits(v + 1, n - 1, 18, &ignored) : fx_digits(v, n, 18, &ignored);
}

/* A value checked as its field's type checks it (dictionary.TYPE_CHECKS, on a narrower syntax):
 * 0, or -1. A char is one ASCII byte among its field's values (any printable one if it has none). */
static int fx_check(const FxRules *r, int tag, const uint8_t *v, size_t n) {
    long long ignored;
    double number;
    int64_t ns;
    switch (r->type[tag]) {
    case FX_T_INT: return fx_int(v, n);
    case FX_T_SEQNUM: return v[0] == '0' ? -1 : fx_digits(v, n, 18, &ignored);
    case FX_T_PRICE:
    case FX_T_QTY: return fx_decimal(v, n, &number);
    case FX_T_CHAR: return n == 1 && v[0] < 128 && (r->chars[tag][v[0] >> 6] >> (v[0] & 63) & 1) ? 0 : -1;
    case FX_T_STRING: return fx_text(v, n);
    case FX_T_TIMESTAMP: return fx_timestamp(v, n, &ns);
    case FX_T_TIME: return fx_time(v, n);
    case FX_T_DATE: return n == 8 ? fx_digits(v, n, 8, &ignored) : -1;
    default: return -1;
    }
}

/* A message being parsed: where the group is, the entry open, the tags seen. */
typedef struct {
    FxMsg *m;
    const FxRules *r;
    int kind;            /* FX_KIND_X or FX_KIND_W */
    long long count;     /* 268's value, -1 before it */
    FxEntry *e;          /* the entry open, or NULL */
    int symbol, w_symbol; /* the last entry's symbol (an X entry without 55 inherits it); W's 55 */
    PyObject *securities;  /* SecurityID (or SecurityIDSource:SecurityID) -> symbol, or NULL */
    const uint8_t *sec[2], *src[2]; /* 48 and 22: [0] the body's, [1] the open entry's (NULL: none) */
    size_t sec_len[2], src_len[2];
    int has_seq, has_sending, has_transact;
    int64_t sending, transact;
    int head[FX_MAX_FIELDS], n_head;   /* header and body tags seen (each at most once) */
    int entry[FX_MAX_FIELDS], n_entry; /* the open entry's tags seen */
} FxParse;

/* ``tag`` added to ``seen`` (n of them): 0, or -1 when it was there (duplicate_tag) or too many. */
static int fx_once(int *seen, int *n, int tag) {
    for (int i = 0; i < *n; i++) {
        if (seen[i] == tag) return -1;
    }
    if (*n >= FX_MAX_FIELDS) return -1;
    seen[(*n)++] = tag;
    return 0;
}

/* Fix44Converter._symbol's security table: the symbol of the 48 (with its 22, or none) of the
 * body (``which`` 0) or the open entry (1) -- "22:48", else "48" -- as the message's symbol index,
 * or -1: no such security (unknown_security) or an empty symbol, the Python path's. */
static int fx_security(FxParse *p, int which) {
    if (p->securities == NULL) return -1;
    char joined[256]; /* "22:48" (a longer pair: the Python path's) */
    size_t src_len = p->src[which] ? p->src_len[which] : 0, sec_len = p->sec_len[which];
    if (src_len + 1 + sec_len > sizeof joined) return -1;
    if (src_len) memcpy(joined, p->src[which], src_len);
    joined[src_len] = ':';
    memcpy(joined + src_len + 1, p->sec[which], sec_len);
    PyObject *keys[2] = {PyUnicode_FromStringAndSize(joined, (Py_ssize_t)(src_len + 1 + sec_len)),
                         PyUnicode_FromStringAndSize((const char *)p->sec[which], (Py_ssize_t)sec_len)};
    const char *name = NULL;
    Py_ssize_t n = 0;
    for (int i = 0; i < 2 && name == NULL; i++) { /* securities.get(source:id) or securities.get(id) */
        PyObject *found = keys[i] == NULL ? NULL : PyDict_GetItemWithError(p->securities, keys[i]);
        if (found != NULL && PyUnicode_Check(found) && PyUnicode_GET_LENGTH(found) > 0) name = PyUnicode_AsUTF8AndSize(found, &n);
    }
    int index = name != NULL ? fx_symbol(p->m, (const uint8_t *)name, (size_t)n) : -1;
    Py_XDECREF(keys[0]);
    Py_XDECREF(keys[1]);
    PyErr_Clear();
    return index;
}

/* Fix44Converter._entry's checks of a finished entry, and its symbol (X: 55, or the previous
 * entry's; W: the body's 55): 0, or -1. What an entry needs is the dictionary's entry_needs
 * (native.py checks they are these), a Delete's only what locates it. */
static int fx_entry_done(FxParse *p, FxEntry *e) {
    if (e->type == 0) return -1; /* no 269 */
    if (p->kind == FX_KIND_W && p->w_symbol < 0 && p->sec[0] != NULL && (p->w_symbol = fx_security(p, 0)) < 0) return -1;
    if (p->kind == FX_KIND_W) e->sym = p->w_symbol;
    if (e->sym < 0 && p->sec[1] != NULL && (e->sym = fx_security(p, 1)) < 0) return -1; /* 48 when no 55 */
    if (e->sym < 0) e->sym = p->symbol;
    if (e->sym < 0) return -1; /* missing_symbol */
    p->symbol = e->sym;
    int book = e->type == '0' || e->type == '1';
    if (e->action == FX_DELETE) return (book && !e->has_level && !e->has_price) ? -1 : 0;
    if (book || e->type == '2') return (e->has_price && e->has_size) ? 0 : -1;
    if (e->type >= '4' && e->type <= '8') return e->has_price ? 0 : -1;
    if (e->type == 'B' || e->type == 'C') return e->has_size ? 0 : -1;
    return 0; /* a type that moves nothing needs nothing */
}

/* 268: the group's count (X: at least one entry), once: 0, or -1. */
static int fx_count(FxParse *p, const uint8_t *v, size_t n) {
    if (p->count >= 0 || fx_digits(v, n, 6, &p->count) < 0 || p->count > FX_MAX_ENTRIES) return -1;
    return p->kind == FX_KIND_X && p->count == 0 ? -1 : 0;
}

/* The group's delimiter (X: 279, the action; W: 269, the type) opens an entry: 0, or -1. */
static int fx_open_entry(FxParse *p, int tag, const uint8_t *v, size_t n) {
    if ((p->e != NULL && fx_entry_done(p, p->e) < 0) || p->m->n_entries >= p->count) return -1;
    FxEntry *e = p->e = &p->m->e[p->m->n_entries++];
    memset(e, 0, sizeof *e);
    e->sym = -1;
    p->n_entry = 0;
    p->sec[1] = p->src[1] = NULL;
    if (fx_check(p->r, tag, v, n) < 0) return -1;
    if (p->kind == FX_KIND_W) {
        e->type = (char)v[0];
        return 0;
    }
    if (v[0] < '0' || v[0] > '2') return -1; /* 3, 4 and 5 are bad_value: only New, Change, Delete */
    e->action = v[0] - '0';
    return 0;
}

/* A header or body field (before the group only, once): 0, or -1. */
static int fx_head_field(FxParse *p, int tag, const uint8_t *v, size_t n) {
    if (p->count >= 0 || fx_once(p->head, &p->n_head, tag) < 0) return -1;
    switch (tag) {
    case 34: return (p->has_seq = 1, v[0] == '0' ? -1 : fx_digits(v, n, 18, &p->m->seq));
    case 52: return (p->has_sending = 1, fx_timestamp(v, n, &p->sending));
    case 60: return (p->has_transact = 1, fx_timestamp(v, n, &p->transact));
    case 55: return fx_text(v, n) < 0 || (p->w_symbol = fx_symbol(p->m, v, n)) < 0 ? -1 : 0; /* W's symbol */
    case 48: return fx_text(v, n) < 0 ? -1 : (p->sec[0] = v, p->sec_len[0] = n, 0);
    case 22: return fx_text(v, n) < 0 ? -1 : (p->src[0] = v, p->src_len[0] = n, 0);
    default: return fx_check(p->r, tag, v, n);
    }
}

/* A field of the open entry (once in it): 0, or -1. */
static int fx_group_field(FxParse *p, int tag, const uint8_t *v, size_t n) {
    FxEntry *e = p->e;
    if (e == NULL || fx_once(p->entry, &p->n_entry, tag) < 0) return -1; /* bad_group, duplicate_tag */
    switch (tag) {
    case 269: return fx_check(p->r, tag, v, n) < 0 ? -1 : (e->type = (char)v[0], 0); /* X's */
    case 55: return fx_text(v, n) < 0 || (e->sym = fx_symbol(p->m, v, n)) < 0 ? -1 : 0;
    case 48: return fx_text(v, n) < 0 ? -1 : (p->sec[1] = v, p->sec_len[1] = n, 0);
    case 22: return fx_text(v, n) < 0 ? -1 : (p->src[1] = v, p->src_len[1] = n, 0);
    case 270: return (e->has_price = 1, fx_decimal(v, n, &e->price));
    case 271: return (e->has_size = 1, fx_decimal(v, n, &e->size) < 0 || e->size < 0 ? -1 : 0);
    case 1023: return (e->has_level = 1, fx_digits(v, n, 9, &e->level) < 0 || e->level < 1 ? -1 : 0);
    case 346: return fx_digits(v, n, 18, &e->orders);
    default: return fx_check(p->r, tag, v, n);
    }
}

/* One field of the body: 0, or -1. A tag the dictionary does not define, or defines for
 * another message, is skipped, as the Python parser skips it. */
static int fx_parse_field(FxParse *p, int tag, const uint8_t *v, size_t n) {
    if (tag == 268) return fx_count(p, v, n);
    if (p->count >= 0 && tag == (p->kind == FX_KIND_W ? 269 : 279)) return fx_open_entry(p, tag, v, n);
    int role = tag < FX_RULE_TAGS ? p->r->role[p->kind][tag] : FX_ROLE_IGNORED;
    switch (role) {
    case FX_ROLE_IGNORED: return 0;
    case FX_ROLE_HEAD: return fx_head_field(p, tag, v, n);
    case FX_ROLE_ENTRY: return fx_group_field(p, tag, v, n);
    default: return -1; /* FX_ROLE_STOP */
    }
}

/* Fix44Converter.parse for what this path takes (35=X and 35=W): 0, or -1 (the Python path
 * parses it). */
static int fx_parse(const FxRules *r, PyObject *securities, const uint8_t *body, size_t len, FxMsg *m) {
    FxCursor c = {body, body + len};
    int tag, rc;
    const uint8_t *v;
    size_t n;
    if (body[len - 1] != FX_SOH || fx_field(&c, &tag, &v, &n) != 1 || tag != 35 || n != 1 || (v[0] != 'X' && v[0] != 'W'))
        return -1;
    FxParse p = {.m = m, .r = r, .kind = v[0] == 'W' ? FX_KIND_W : FX_KIND_X, .count = -1, .symbol = -1, .w_symbol = -1,
                 .securities = securities};
    p.head[p.n_head++] = 35;
    m->n_entries = m->n_symbols = 0;
    m->full = p.kind == FX_KIND_W;
    while ((rc = fx_field(&c, &tag, &v, &n)) == 1) {
        if (fx_parse_field(&p, tag, v, n) < 0) return -1;
    }
    if (rc != 0 || p.count < 0 || !p.has_seq || (p.e != NULL && fx_entry_done(&p, p.e) < 0) || m->n_entries != p.count)
        return -1;
    if (p.kind == FX_KIND_W && p.w_symbol < 0 && (p.sec[0] == NULL || (p.w_symbol = fx_security(&p, 0)) < 0))
        return -1; /* no 55 and no 48 in the table (an empty W) */
    m->ns = p.has_transact ? p.transact : p.has_sending ? p.sending : 0;
    return 0;
}

/* ---- applying entries (book.apply_entries on the table's records) ----
 *
 * Entries change the sides in place and log how to undo each change (FxUndo), so a message
 * that stops after it changed something (a full side, a volume out of int64, the packet's
 * room) is put back exactly; the session values change on the message's copy (FxSym.s). */

#define FX_UNDO_SET 0      /* put ``old`` back at ``index`` */
#define FX_UNDO_INSERTED 1 /* remove ``index`` (and put back ``cut``, pushed off the end, when ``dropped``) */
#define FX_UNDO_DELETED 2  /* insert ``old`` at ``index`` (where its room still is: no allocation) */
#define FX_UNDO_REPLACED 3 /* the side was built anew (a mode switch): ``saved`` is the one before */
#define FX_MAX_UNDO (3 * FX_MAX_ENTRIES) /* an entry logs its change and at most one switch (two sides) */

typedef struct {
    FxSide *side;
    uint32_t index;
    int kind, dropped;
    ShownLevel old, cut;
    FxSide saved; /* FX_UNDO_REPLACED: owned by the log until the commit frees it */
} FxUndo;

/* One symbol of a message: its record, its values after the message and what it wrote. */
typedef struct {
    FxBook *book; /* the table's, or a new one (owned until the commit) */
    int is_new, touched[2];
    FxValues s;
    uint64_t hash_before[2], digest;
    uint32_t count_before[2]; /* each touched side's levels before the message */
    size_t old_at[2];  /* its shown levels before the message: where in FxCtx.pool */
    uint32_t n_old[2]; /* how many */
    int replaced[2];   /* a 35=W: the side was built anew, the record's own kept in ``saved`` */
    FxSide saved[2];
} FxSym;

/* One run() call: the table, the settings, and what it has collected. */
typedef struct {
    BookTableObject *table;
    const FxRules *rules;
    PyObject *securities;
    Py_ssize_t depth, max_prices;
    long long expect_seq, stop_seq, room;
    int empty_packet, source_stream, publish;
    Py_ssize_t max_count, count;
    long long publish_ns, first_seq;
    Buf blocks, digests;
    PyObject *payloads;
    ShownLevel *pool; /* a message's saved shown levels and the diff's scratch */
    size_t pool_len, pool_cap;
    FxUndo undo[FX_MAX_UNDO];
    int n_undo;
} FxCtx;

/* ``n`` levels of the pool: their offset, or (size_t)-1 with MemoryError. */
static size_t fx_take(FxCtx *c, size_t n) {
    if (c->pool_len + n > c->pool_cap) {
        size_t cap = c->pool_cap ? c->pool_cap : 64;
        while (cap < c->pool_len + n) cap *= 2;
        ShownLevel *pool = PyMem_Realloc(c->pool, cap * sizeof *pool);
        if (pool == NULL) {
            PyErr_NoMemory();
            return (size_t)-1;
        }
        c->pool = pool;
        c->pool_cap = cap;
    }
    size_t at = c->pool_len;
    c->pool_len += n;
    return at;
}

/* Before a side's first change in a message: its shown levels and hash saved. 0, or -1. */
static int fx_touch(FxCtx *c, FxSym *s, int side) {
    if (s->touched[side]) return 0;
    FxSide *levels = &s->book->side[side];
    uint32_t shown = fx_n(levels) < (uint64_t)c->depth ? fx_n(levels) : (uint32_t)c->depth;
    size_t at = fx_take(c, shown);
    if (at == (size_t)-1) return -1;
    fx_copy_best(levels, shown, c->pool + at);
    s->old_at[side] = at;
    s->n_old[side] = shown;
    s->hash_before[side] = levels->hash;
    s->count_before[side] = fx_n(levels);
    s->touched[side] = 1;
    return 0;
}

static void fx_log(FxCtx *c, FxSide *side, int kind, uint32_t index, const ShownLevel *old) {
    FxUndo *u = &c->undo[c->n_undo++];
    u->side = side;
    u->kind = kind;
    u->index = index;
    u->dropped = 0;
    if (old != NULL) u->old = *old;
}

/* Every change of the message taken back, last first (the sides' hashes by the caller). Nothing
 * shrank since (lt_trim runs after a commit only), so nothing here allocates. */
static void fx_undo(FxCtx *c) {
    while (c->n_undo > 0) {
        FxUndo *u = &c->undo[--c->n_undo];
        LevelTree *levels = &u->side->levels;
        if (u->kind == FX_UNDO_REPLACED) { /* the side built at the switch goes, the one before comes back */
            lt_clear(levels);
            *u->side = u->saved;
        } else if (u->kind == FX_UNDO_SET) {
            *fx_at(u->side, u->index) = u->old;
        } else if (u->kind == FX_UNDO_DELETED) {
            lt_put_back(levels, u->index, &(LtItem){.shown = u->old});
        } else {
            lt_remove(levels, u->index);
            if (u->dropped) lt_put_back(levels, lt_count(levels), &(LtItem){.shown = u->cut});
        }
    }
}

typedef struct {
    double key; /* the side's key of a price: -price for bids, price for asks (best first) */
    int is_bid;
} FxKey;

static int fx_cmp(const LtItem *item, const void *key) {
    const FxKey *k = key;
    double at = k->is_bid ? -item->shown.price : item->shown.price;
    return (at > k->key) - (at < k->key);
}

/* book.find_price on a price-keyed side: the level at ``price`` or NULL, and in *at where it
 * is or would go, best first (bisect_left by the side's key). */
static ShownLevel *fx_find(FxSide *s, double price, int is_bid, uint32_t *at) {
    FxKey key = {is_bid ? -price : price, is_bid};
    LtItem *item = lt_search(&s->levels, fx_cmp, &key, at);
    return item == NULL ? NULL : &item->shown;
}

/* Insert the entry's level at ``at``: 0, or -1 with MemoryError (nothing changed). */
static int fx_insert(FxSide *s, uint32_t at, const FxEntry *e) {
    return lt_insert(&s->levels, at, &(LtItem){.shown = {e->price, e->size, e->orders}});
}

/* book._apply_price: 0, STOP_SLOW (book_full: the Python path quarantines) or -1. */
static int fx_apply_price(FxCtx *c, FxSide *s, const FxEntry *e, int side) {
    uint32_t at;
    ShownLevel *found = fx_find(s, e->price, side == 0, &at);
    uint64_t side_no = (uint64_t)side + 1;
    if (e->action == FX_DELETE) {
        if (found == NULL) return 0;
        s->hash -= fx_mix(found, 0, side_no);
        fx_log(c, s, FX_UNDO_DELETED, at, found);
        lt_remove(&s->levels, at);
        return 0;
    }
    ShownLevel level = {e->price, e->size, e->orders};
    if (found != NULL) {
        s->hash += fx_mix(&level, 0, side_no) - fx_mix(found, 0, side_no);
        fx_log(c, s, FX_UNDO_SET, at, found);
        *found = level;
        return 0;
    }
    if ((Py_ssize_t)fx_n(s) >= c->max_prices) return STOP_SLOW;
    if (fx_insert(s, at, e) < 0) return -1;
    fx_log(c, s, FX_UNDO_INSERTED, at, NULL);
    s->hash += fx_mix(&level, 0, side_no);
    return 0;
}

/* book._apply_level (the side's hash is summed again after the message): 0, STOP_SLOW or -1. */
static int fx_apply_level(FxCtx *c, FxSide *s, const FxEntry *e) {
    uint32_t n = fx_n(s);
    long long index = e->level - 1;
    if (e->action == FX_DELETE) {
        if (index < n) {
            fx_log(c, s, FX_UNDO_DELETED, (uint32_t)index, fx_at(s, (uint32_t)index));
            lt_remove(&s->levels, (uint32_t)index);
        }
        return 0;
    }
    if (e->action == FX_CHANGE && index < n) {
        ShownLevel *at = fx_at(s, (uint32_t)index);
        fx_log(c, s, FX_UNDO_SET, (uint32_t)index, at);
        *at = (ShownLevel){e->price, e->size, e->orders};
        return 0;
    }
    if (index >= c->depth) return 0;
    if ((Py_ssize_t)n > c->depth) return STOP_SLOW; /* deeper than the depth (an adopted book): Python's */
    uint32_t at = index < n ? (uint32_t)index : n;
    if (fx_insert(s, at, e) < 0) return -1;
    fx_log(c, s, FX_UNDO_INSERTED, at, NULL);
    if ((Py_ssize_t)fx_n(s) > c->depth) { /* pushed past the depth: falls off, and does not come back */
        FxUndo *u = &c->undo[c->n_undo - 1];
        u->dropped = 1;
        u->cut = *fx_at(s, fx_n(s) - 1);
        lt_remove(&s->levels, fx_n(s) - 1);
    }
    return 0;
}


/* book._apply_session_entry: 0, or STOP_SLOW (the trade count would leave int64). */
static int fx_session(FxValues *v, const FxEntry *e) {
    double price = e->price, size = e->size;
    int high = !(v->set >> FX_S_HIGH & 1) || price > v->session[FX_S_HIGH];
    int low = !(v->set >> FX_S_LOW & 1) || price < v->session[FX_S_LOW];
    switch (e->type) {
    case '2': {
        if (v->trades == LLONG_MAX) return STOP_SLOW;
        double volume = v->set >> FX_S_VOLUME & 1 ? v->session[FX_S_VOLUME] : 0.0;
        if (volume == 0.0) volume = 0.0; /* (book.volume or 0.0): -0.0 too */
        v->session[FX_S_LAST] = price;
        v->session[FX_S_VOLUME] = volume + size;
        if (high) v->session[FX_S_HIGH] = price;
        if (low) v->session[FX_S_LOW] = price;
        v->book_notional += price * size;
        v->traded += size;
        v->trades++;
        v->set |= 1u << FX_S_LAST | 1u << FX_S_VOLUME | 1u << FX_S_HIGH | 1u << FX_S_LOW;
        if (v->traded != 0.0) {
            v->session[FX_S_VWAP] = v->book_notional / v->traded;
            v->set |= 1u << FX_S_VWAP;
        }
        return 0;
    }
    case '4': v->session[FX_S_OPEN] = price, v->set |= 1u << FX_S_OPEN; return 0;
    case '5': v->session[FX_S_CLOSE] = price, v->set |= 1u << FX_S_CLOSE; return 0;
    case '6': v->session[FX_S_SETTLE] = price, v->set |= 1u << FX_S_SETTLE; return 0;
    case '7':
        if (high) v->session[FX_S_HIGH] = price, v->set |= 1u << FX_S_HIGH;
        return 0;
    case '8':
        if (low) v->session[FX_S_LOW] = price, v->set |= 1u << FX_S_LOW;
        return 0;
    case 'B': v->session[FX_S_VOLUME] = size, v->set |= 1u << FX_S_VOLUME; return 0;
    default: v->session[FX_S_INTEREST] = size, v->set |= 1u << FX_S_INTEREST; return 0; /* 'C' */
    }
}

/* One side as book._switch_mode makes it: to level-indexed, its best ``depth`` levels; to
 * price-keyed, one level a price (the first of a price wins), best first. 0, or -1. */
static int fx_switched_side(FxCtx *c, const FxSide *from, FxSide *to, int to_level, int is_bid) {
    LtIter it;
    lt_first(&from->levels, &it);
    for (const LtItem *item; (item = lt_next(&it)) != NULL;) {
        uint32_t at = fx_n(to);
        if (to_level && (Py_ssize_t)at >= c->depth) break;
        if (!to_level && fx_find(to, item->shown.price, is_bid, &at) != NULL) continue;
        if (lt_insert(&to->levels, at, item) < 0) return -1;
    }
    return 0;
}

/* An X entry of the other kind switches its book's kind (book._switch_mode): both sides built
 * anew, each logged as replaced (FX_UNDO_REPLACED keeps the one before until the commit). 0, or -1. */
static int fx_switch(FxCtx *c, FxSym *s) {
    int to_level = !s->s.level_indexed;
    for (int side = 0; side < 2; side++) {
        FxSide *at = &s->book->side[side], fresh;
        memset(&fresh, 0, sizeof fresh);
        if (fx_touch(c, s, side) < 0 || fx_switched_side(c, at, &fresh, to_level, side == 0) < 0) {
            lt_clear(&fresh.levels);
            return -1;
        }
        FxUndo *u = &c->undo[c->n_undo++];
        u->side = at;
        u->kind = FX_UNDO_REPLACED;
        u->saved = *at;
        *at = fresh;
        fx_rehash(at, to_level, side);
    }
    s->s.level_indexed = to_level;
    return 0;
}

/* The sides a commit no longer needs to put back: those a switch replaced. */
static void fx_forget(FxCtx *c) {
    for (int i = 0; i < c->n_undo; i++) {
        if (c->undo[i].kind == FX_UNDO_REPLACED) lt_clear(&c->undo[i].saved.levels);
    }
    c->n_undo = 0;
}

/* One entry applied to its symbol: 0, STOP_SLOW or -1. */
static int fx_apply(FxCtx *c, FxSym *s, const FxEntry *e) {
    if (e->type > '1') return e->action == FX_DELETE || strchr(FX_TYPES, e->type) == NULL ? 0 : fx_session(&s->s, e);
    int side = e->type == '0' ? 0 : 1;
    if (fx_touch(c, s, side) < 0) return -1;
    if (e->has_level != s->s.level_indexed && fx_switch(c, s) < 0) return -1;
    FxSide *levels = &s->book->side[side];
    return e->has_level ? fx_apply_level(c, levels, e) : fx_apply_price(c, levels, e, side);
}

/* ---- a full refresh (35=W: book._refresh) ---- */

/* The side's levels built anew from the message's entries of ``type``: a level-indexed book's
 * by their 1023 (stable; none counts as 0), cut to the depth; a price-keyed book's as News
 * (a price given twice: the later wins). 0, STOP_SLOW (book_full) or -1. */
static int fx_refresh_side(FxCtx *c, FxSide *side, const FxMsg *m, char type, int level_indexed) {
    const FxEntry *mine[FX_MAX_ENTRIES];
    int n = 0;
    for (int i = 0; i < m->n_entries; i++) {
        const FxEntry *e = &m->e[i];
        if (e->type != type) continue;
        int at = n++;
        long long key = e->has_level ? e->level : 0;
        while (level_indexed && at > 0 && (mine[at - 1]->has_level ? mine[at - 1]->level : 0) > key) {
            mine[at] = mine[at - 1];
            at--;
        }
        mine[at] = e;
    }
    for (int i = 0; i < n; i++) {
        const FxEntry *e = mine[i];
        if (level_indexed) {
            if (i >= c->depth) break;
            if (fx_insert(side, fx_n(side), e) < 0) return -1;
            continue;
        }
        uint32_t at;
        ShownLevel *found = fx_find(side, e->price, type == '0', &at);
        if (found != NULL) {
            *found = (ShownLevel){e->price, e->size, e->orders};
        } else if ((Py_ssize_t)fx_n(side) >= c->max_prices) {
            return STOP_SLOW;
        } else if (fx_insert(side, at, e) < 0) {
            return -1;
        }
    }
    return 0;
}

/* A 35=W applied to its symbol: both sides built anew (the record's kept in FxSym.saved until
 * the commit), then the session values its entries carry (a trade sets the last price only).
 * 0, STOP_SLOW (book_full) or -1. */
static int fx_refresh(FxCtx *c, FxSym *s, const FxMsg *m) {
    int level_indexed = 0;
    for (int i = 0; i < m->n_entries; i++) level_indexed |= m->e[i].type <= '1' && m->e[i].has_level;
    s->s.level_indexed = level_indexed;
    for (int side = 0; side < 2; side++) {
        if (fx_touch(c, s, side) < 0) return -1;
        s->saved[side] = s->book->side[side];
        memset(&s->book->side[side], 0, sizeof s->book->side[side]);
        s->replaced[side] = 1;
        int rc = fx_refresh_side(c, &s->book->side[side], m, side ? '1' : '0', level_indexed);
        if (rc != 0) return rc;
        fx_rehash(&s->book->side[side], level_indexed, side);
    }
    static const char kinds[] = "245678";
    static const int sets[] = {FX_S_LAST, FX_S_OPEN, FX_S_CLOSE, FX_S_SETTLE, FX_S_HIGH, FX_S_LOW};
    FxValues *v = &s->s;
    for (int i = 0; i < m->n_entries; i++) {
        const FxEntry *e = &m->e[i];
        const char *k = e->type > '1' ? strchr(kinds, e->type) : NULL;
        int which = k != NULL && e->has_price ? sets[k - kinds] : e->type == 'B' && e->has_size ? FX_S_VOLUME
                  : e->type == 'C' && e->has_size ? FX_S_INTEREST : -1;
        if (which < 0) continue;
        v->session[which] = which == FX_S_VOLUME || which == FX_S_INTEREST ? e->size : e->price;
        v->set |= 1u << which;
    }
    return 0;
}

/* ---- one message ---- */

/* The message's symbols found (or new records made) and checked before anything changes:
 * 0, STOP_SLOW (one more symbol than max_symbols, a book-less record) or -1. A new book is
 * price-keyed (BookValues()): its first level entry switches it (fx_switch), as in Python. */
static int fx_stage(FxCtx *c, const FxMsg *m, FxSym *syms) {
    BookTableObject *t = c->table;
    Py_ssize_t fresh = 0;
    for (int i = 0; i < m->n_symbols; i++) {
        FxSym *s = &syms[i];
        s->book = bt_find(t, (const char *)m->sym[i], (Py_ssize_t)m->sym_len[i], NULL);
        if (s->book == NULL) {
            if (t->count + ++fresh > t->max_symbols) return STOP_SLOW; /* symbol_limit */
            if ((s->book = fx_book_new((const char *)m->sym[i], (Py_ssize_t)m->sym_len[i])) == NULL) return -1;
            s->is_new = 1;
        }
        s->s = s->book->s;
        if (!s->s.has_book) return STOP_SLOW;
    }
    return 0;
}

/* fix44_engine._summarize: SymbolValues' nine from the book. 0, or STOP_SLOW (the volume leaves int64). */
static int fx_summarize(FxSym *s) {
    FxValues *v = &s->s;
    FxBook *b = s->book;
    double volume = v->set >> FX_S_VOLUME & 1 ? v->session[FX_S_VOLUME] : 0.0;
    if (!(volume < 9223372036854775808.0 && volume > -9223372036854775808.0)) return STOP_SLOW;
    double *out[4] = {&v->high, &v->low, &v->last, &v->vwap};
    static const int from[4] = {FX_S_HIGH, FX_S_LOW, FX_S_LAST, FX_S_VWAP};
    for (int i = 0; i < 4; i++) { /* ``value or 0.0``: None, 0.0 and -0.0 give 0.0 */
        double d = v->set >> from[i] & 1 ? v->session[from[i]] : 0.0;
        *out[i] = d == 0.0 ? 0.0 : d;
    }
    v->volume = (int64_t)volume;
    v->trade_count = v->trades;
    v->notional = v->book_notional;
    v->bid = fx_n(&b->side[0]) ? fx_at(&b->side[0], 0)->price : 0.0;
    v->ask = fx_n(&b->side[1]) ? fx_at(&b->side[1], 0)->price : 0.0;
    return 0;
}

/* The distinct prices (by ==, the first entry's standing for it) the symbol's entries of
 * ``type`` name, best first (``descending`` for bids): how many, into ``out`` (room for
 * FX_MAX_ENTRIES). No price is a NaN (fx_decimal), so the order is total. */
static int fx_named_prices(const FxMsg *m, int index, char type, int descending, double *out) {
    int n = 0;
    for (int i = 0; i < m->n_entries; i++) {
        const FxEntry *e = &m->e[i];
        if (e->sym != index || e->type != type || !e->has_price) continue;
        int at = 0, seen = 0;
        while (at < n && !seen && (descending ? out[at] > e->price : out[at] < e->price)) at++;
        seen = at < n && out[at] == e->price;
        if (seen) continue;
        memmove(&out[at + 1], &out[at], (size_t)(n - at) * sizeof *out);
        out[at] = e->price;
        n++;
    }
    return n;
}

/* PriceLevel {side, price, size, orders, deleted} as SymbolUpdate.levels' item. */
static int w_price_level(Buf *b, int side, double price, double size, int64_t orders, int deleted) {
    size_t start;
    if (w_small_open(b, &start) < 0 || w_varint(b, FH_PRICELEVEL_SIDE_TAG, (uint64_t)side) < 0 || w_double(b, FH_PRICELEVEL_PRICE_TAG, price, 0) < 0 ||
        w_double(b, FH_PRICELEVEL_SIZE_TAG, size, 0) < 0 || w_varint(b, FH_PRICELEVEL_ORDERS_TAG, (uint64_t)orders) < 0 ||
        w_varint(b, FH_PRICELEVEL_DELETED_TAG, (uint64_t)deleted) < 0)
        return -1;
    return w_small_close(b, start, FH_SYMBOLUPDATE_LEVELS_TAG); /* a body of at most 39 bytes */
}

/* SymbolUpdate.levels and book_replaced (fix44_wire.price_levels for what a run takes). A
 * level-indexed book has none (a block shows all of it). A new price-keyed book was rebuilt:
 * every price it holds, then book_replaced. Otherwise each price its bid and offer entries
 * named, bids then asks, best first, as the book now has it (that level's own price bits),
 * or deleted at the price its first entry gave when the book no longer has it. 0, or -1. */
static int fx_price_levels(Buf *b, const FxMsg *m, int index, const FxSym *s) {
    if (s->s.level_indexed) return 0;
    int rebuilt = s->is_new || m->full || s->book->s.level_indexed; /* new, refreshed, switched */
    for (int i = 0; i < m->n_entries && !rebuilt; i++) {
        const FxEntry *e = &m->e[i];
        rebuilt = e->sym == index && (e->type == '0' || e->type == '1') && e->has_level;
    }
    if (rebuilt) {
        for (int side = 0; side < 2; side++) {
            LtIter it;
            lt_first(&s->book->side[side].levels, &it);
            for (const LtItem *item; (item = lt_next(&it)) != NULL;) {
                const ShownLevel *l = &item->shown;
                if (w_price_level(b, side + 1, l->price, l->size, l->orders, 0) < 0) return -1;
            }
        }
        return w_varint(b, FH_SYMBOLUPDATE_BOOK_REPLACED_TAG, 1);
    }
    double named[FX_MAX_ENTRIES];
    for (int side = 0; side < 2; side++) {
        FxSide *levels = &s->book->side[side];
        int n = fx_named_prices(m, index, side ? '1' : '0', side == 0, named);
        for (int i = 0; i < n; i++) {
            uint32_t at;
            const ShownLevel *l = fx_find(levels, named[i], side == 0, &at);
            int rc = l != NULL ? w_price_level(b, side + 1, l->price, l->size, l->orders, 0)
                               : w_price_level(b, side + 1, named[i], 0.0, 0, 1);
            if (rc < 0) return -1;
        }
    }
    return 0;
}

/* Book {level_indexed, depth, bids, asks}, each side cut to its best ``depth`` levels. */
static int fx_w_book(Buf *b, const FxBook *book, int level_indexed, Py_ssize_t depth) {
    size_t start;
    if (w_open(b, &start) < 0 || w_varint(b, FH_BOOK_LEVEL_INDEXED_TAG, (uint64_t)level_indexed) < 0 ||
        w_varint(b, FH_BOOK_DEPTH_TAG, (uint64_t)depth) < 0)
        return -1;
    for (int side = 0; side < 2; side++) {
        const FxSide *levels = &book->side[side];
        uint32_t shown = fx_n(levels) < (uint64_t)depth ? fx_n(levels) : (uint32_t)depth;
        if (buf_reserve(b, (size_t)shown * BOOK_LEVEL_ROOM) < 0) return -1;
        uint8_t *p = b->data + b->len;
        LtIter it;
        lt_first(&levels->levels, &it);
        for (uint32_t i = 0; i < shown; i++) {
            const ShownLevel *l = &lt_next(&it)->shown;
            p = put_book_level(p, side ? FH_BOOK_ASKS_TAG : FH_BOOK_BIDS_TAG, l->price, l->size, l->orders);
        }
        b->len = (size_t)(p - b->data);
    }
    return w_end(b, start, FH_SYMBOLSTATE_BOOK_TAG);
}

/* SymbolState of a record with values ``v``: the nine values, the book, its session values. */
static int fx_w_state(Buf *b, const FxBook *book, const FxValues *v, Py_ssize_t depth) {
    static const uint8_t tags[9] = {FH_SESSIONVALUES_VOLUME_TAG, FH_SESSIONVALUES_LAST_TAG,
                                    FH_SESSIONVALUES_HIGH_TAG,   FH_SESSIONVALUES_LOW_TAG,
                                    FH_SESSIONVALUES_OPEN_TAG,   FH_SESSIONVALUES_CLOSE_TAG,
                                    FH_SESSIONVALUES_SETTLE_TAG, FH_SESSIONVALUES_OPEN_INTEREST_TAG,
                                    FH_SESSIONVALUES_VWAP_TAG};
    size_t start;
    if (w_open(b, &start) < 0 || buf_reserve(b, STATE_VALUES_ROOM) < 0) return -1;
    b->len = (size_t)(put_state_values(b->data + b->len, v->volume, v->high, v->low, v->last, v->vwap, v->trade_count,
                                       v->bid, v->ask, v->notional) -
                      b->data);
    if (fx_w_book(b, book, v->level_indexed, depth) < 0) return -1;
    size_t session = b->len;
    for (int i = 0; i < 9; i++) {
        if ((v->set >> i & 1) && w_double(b, tags[i], v->session[i], 1) < 0) return -1;
    }
    if (w_double(b, FH_SESSIONVALUES_NOTIONAL_TAG, v->book_notional, 0) < 0 ||
        w_double(b, FH_SESSIONVALUES_TRADED_TAG, v->traded, 0) < 0 ||
        w_varint(b, FH_SESSIONVALUES_TRADES_TAG, (uint64_t)v->trades) < 0 || w_close(b, session, FH_SYMBOLSTATE_SESSION_TAG) < 0)
        return -1;
    return w_end(b, start, FH_SYMBOLUPDATE_STATE_TAG);
}

/* One SymbolUpdate (fix44_wire.encode_symbol): 0, STOP_SLOW or -1. */
static int fx_symbol_update(FxCtx *c, const FxMsg *m, int index, const FxSym *s) {
    Buf *b = &c->blocks;
    size_t start, name;
    const FxBook *book = s->book;
    if (w_open(b, &start) < 0) return -1;
    name = b->len;
    if (book->name_len && (w_raw(b, book->name, (size_t)book->name_len) < 0 || w_close(b, name, FH_SYMBOLUPDATE_SYMBOL_TAG) < 0))
        return -1;
    for (int i = 0; i < m->n_entries; i++) { /* its trades: (price or 0.0, size or 0.0) */
        const FxEntry *e = &m->e[i];
        if (m->full || e->sym != index || e->type != '2' || e->action == FX_DELETE) continue;
        double price = e->price == 0.0 ? 0.0 : e->price, size = e->size == 0.0 ? 0.0 : e->size;
        if (!(size < 9223372036854775808.0)) return STOP_SLOW; /* int(size) is no int64 */
        if (w_trade_of(b, price, (int64_t)size, size) < 0) return -1;
    }
    for (int side = 0; side < 2; side++) { /* shown_changes: the sides the message wrote */
        if (!s->touched[side]) continue;
        const FxSide *levels = &book->side[side];
        uint32_t n_after = fx_n(levels) < (uint64_t)c->depth ? fx_n(levels) : (uint32_t)c->depth;
        size_t after = fx_take(c, (size_t)s->n_old[side] + 2 * (size_t)n_after); /* the shown side, then scratch */
        if (after == (size_t)-1) return -1;
        fx_copy_best(levels, n_after, c->pool + after);
        if (w_changes(b, c->pool + s->old_at[side], s->n_old[side], c->pool + after, n_after, side + 1,
                      c->pool + after + n_after) < 0)
            return -1;
    }
    if (fx_w_state(b, book, &s->s, c->depth) < 0 || fx_price_levels(b, m, index, s) < 0) return -1;
    return w_end(b, start, FH_MARKETUPDATE_SYMBOLS_TAG);
}

/* The message's block (Fix44Engine.encode_staged, framed): 0, STOP_SLOW, STOP_ROOM or -1. */
static int fx_block(FxCtx *c, const FxMsg *m, const FxSym *syms) {
    Buf *b = &c->blocks;
    size_t block_start = b->len;
    if (buf_reserve(b, BLOCK_OVERHEAD) < 0) return -1;
    b->len += BLOCK_OVERHEAD;
    int rc = (w_varint(b, FH_MARKETUPDATE_EVENT_TIME_NS_TAG, (uint64_t)m->ns) < 0 ||
              w_varint(b, FH_MARKETUPDATE_PUBLISH_TIME_NS_TAG, (uint64_t)c->publish_ns) < 0)
                 ? -1
                 : 0;
    for (int i = 0; i < m->n_symbols && rc == 0; i++) rc = fx_symbol_update(c, m, i, &syms[i]);
    size_t payload_len = b->len - block_start - BLOCK_OVERHEAD;
    long long block = BLOCK_OVERHEAD + (long long)payload_len;
    if (rc == 0 && payload_len > MAX_PAYLOAD) rc = STOP_SLOW;
    if (rc == 0 && block > c->room && !(c->empty_packet && c->count == 0)) rc = STOP_ROOM;
    if (rc != 0) {
        b->len = block_start;
        return rc;
    }
    c->room -= block;
    uint8_t *h = b->data + block_start;
    put_block_header(h, payload_len, c->source_stream, (uint64_t)m->seq);
    if (keep_payload(c->payloads, h, payload_len) < 0) return -1;
    return 0;
}

/* Everything the message did taken back: the sides' levels and hashes, its new records. */
static void fx_rollback(FxCtx *c, FxSym *syms, int n) {
    fx_undo(c);
    for (int i = 0; i < n; i++) {
        for (int side = 0; side < 2; side++) {
            if (syms[i].replaced[side]) { /* a 35=W's new side goes, the record's own comes back */
                lt_clear(&syms[i].book->side[side].levels);
                syms[i].book->side[side] = syms[i].saved[side];
            }
            if (syms[i].touched[side]) syms[i].book->side[side].hash = syms[i].hash_before[side];
        }
        if (syms[i].is_new) fx_book_free(syms[i].book);
    }
}

/* The levels one symbol of a staged message adds to the table (a new book: all of them). */
static int64_t fx_sym_growth(const FxSym *s) {
    int64_t grown = 0;
    for (int side = 0; side < 2; side++) {
        if (s->is_new || s->touched[side])
            grown += (int64_t)fx_n(&s->book->side[side]) - (s->is_new ? 0 : s->count_before[side]);
    }
    return grown;
}

/* The levels a staged message adds to the table, and its new symbols in *fresh. */
static int64_t fx_growth(const FxSym *syms, int n, Py_ssize_t *fresh) {
    int64_t grown = 0;
    *fresh = 0;
    for (int i = 0; i < n; i++) {
        *fresh += syms[i].is_new;
        grown += fx_sym_growth(&syms[i]);
    }
    return grown;
}

/* One parsed message staged, encoded and committed: 0, a STOP_* with nothing changed, or -1. */
static int fx_message(FxCtx *c, const FxMsg *m) {
    FxSym syms[FX_MAX_SYMBOLS];
    memset(syms, 0, (size_t)m->n_symbols * sizeof *syms);
    c->pool_len = 0;
    c->n_undo = 0;
    int n = m->n_symbols, rc = fx_stage(c, m, syms);
    if (rc == 0 && m->full) rc = fx_refresh(c, &syms[0], m);
    for (int i = 0; i < m->n_entries && rc == 0 && !m->full; i++) rc = fx_apply(c, &syms[m->e[i].sym], &m->e[i]);
    for (int i = 0; i < n && rc == 0; i++) {
        FxSym *s = &syms[i];
        for (int side = 0; side < 2; side++) { /* a level-indexed side's hash counts positions: summed again */
            if (s->touched[side] && s->s.level_indexed) fx_rehash(&s->book->side[side], 1, side);
        }
        rc = fx_summarize(s);
    }
    Py_ssize_t fresh;
    int64_t grown = fx_growth(syms, n, &fresh);
    if (rc == 0 && bt_over_budget(c->table, fresh, grown)) rc = STOP_SLOW; /* memory_limit: Python names it */
    if (rc == 0 && c->publish) rc = fx_block(c, m, syms);
    for (int i = 0; i < n && rc == 0; i++) rc = fx_digest(syms[i].book, &syms[i].s, &syms[i].digest);
    if (rc == 0 && fresh) rc = bt_reserve(c->table, fresh);
    if (rc != 0) {
        fx_rollback(c, syms, n);
        return rc;
    }
    fx_forget(c);
    for (int i = 0; i < n; i++) { /* BookState.commit; then the sides it changed give back room */
        for (int side = 0; side < 2; side++) {
            if (syms[i].touched[side]) lt_trim(&syms[i].book->side[side].levels);
            if (syms[i].replaced[side]) lt_clear(&syms[i].saved[side].levels);
        }
        FxBook *b = syms[i].book;
        b->s = syms[i].s;
        b->gen = ++c->table->writes;
        if (!syms[i].is_new) c->table->levels += (uint64_t)fx_sym_growth(&syms[i]); /* a new one: bt_insert */
        if (syms[i].is_new) {
            b->digest = syms[i].digest;
            bt_insert(c->table, b);
        } else {
            c->table->digest += syms[i].digest - b->digest;
            b->digest = syms[i].digest;
        }
    }
    return 0;
}

/* Messages from *pos until one stops the run: why (STOP_*), or -1 with an exception. */
static int fx_messages(FxCtx *c, const uint8_t *buf, Py_ssize_t end, Py_ssize_t *pos) {
    FxMsg *m = PyMem_Malloc(sizeof *m);
    if (m == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    int rc = STOP_END;
    while (*pos < end) {
        Py_ssize_t body, body_end, after;
        if (c->count >= c->max_count) {
            rc = STOP_COUNT;
            break;
        }
        if (fx_frame(buf, *pos, end, &body, &body_end, &after) != 0 || fx_parse(c->rules, c->securities, buf + body, (size_t)(body_end - body), m) < 0 ||
            (c->expect_seq && m->seq != c->expect_seq) || (c->stop_seq && m->seq >= c->stop_seq)) {
            rc = STOP_SLOW;
            break;
        }
        if ((rc = fx_message(c, m)) != 0) break;
        if (buf_reserve(&c->digests, 8) < 0) {
            rc = -1;
            break;
        }
        memcpy(c->digests.data + c->digests.len, &c->table->digest, 8);
        c->digests.len += 8;
        if (c->count == 0) c->first_seq = m->seq;
        c->count++;
        c->expect_seq = m->seq + 1;
        *pos = after;
        rc = STOP_END;
    }
    PyMem_Free(m);
    return rc;
}

PyDoc_STRVAR(Fix44Run_run_doc,
             "run(frame, pos, expect_seq, stop_seq, room, max_count, publish_time_ns, source_stream, publish,\n"
             "    want_payloads) -> (pos, count, stop, blocks, first_source_seq, digests, payloads)\n\n"
             "engine.ConversionEngine.run over a frame of FIX messages: 35=X and 35=W in C, stopping\n"
             "(1, the Python path) at anything else.");

#define FX_KEEP_BYTES (1 << 18) /* a buffer past this (256 KiB; a frame of 64 messages writes ~70) is given back after the call */

/* The buffers a call leaves behind kept for the next (emptied), or freed when they grew past
 * FX_KEEP_BYTES or another call was using the object's. */
static void fx_keep_buffers(Fix44RunObject *self, FxCtx *c, int borrowed) {
    Buf *bufs[2][2] = {{&self->blocks, &c->blocks}, {&self->digests, &c->digests}};
    for (int i = 0; i < 2; i++) {
        Buf *mine = bufs[i][0], *used = bufs[i][1];
        if (!borrowed || used->cap > FX_KEEP_BYTES) {
            PyMem_Free(used->data);
            used->data = NULL, used->cap = 0;
        }
        if (borrowed) *mine = (Buf){used->data, 0, used->cap};
    }
    size_t pool_bytes = c->pool_cap * sizeof *c->pool;
    if (!borrowed || pool_bytes > FX_KEEP_BYTES) {
        PyMem_Free(c->pool);
        c->pool = NULL, c->pool_cap = 0;
    }
    if (borrowed) self->pool = c->pool, self->pool_cap = c->pool_cap, self->busy = 0;
}

static PyObject *Fix44Run_run(Fix44RunObject *self, PyObject *args) {
    Py_buffer frame;
    Py_ssize_t pos;
    int want_payloads;
    FxCtx c = {0};
    if (!PyArg_ParseTuple(args, "y*nLLLnLipp", &frame, &pos, &c.expect_seq, &c.stop_seq, &c.room, &c.max_count,
                          &c.publish_ns, &c.source_stream, &c.publish, &want_payloads))
        return NULL;
    c.empty_packet = c.room < 0;
    if (c.empty_packet) c.room = -c.room;
    int borrowed = !self->busy;
    if (borrowed) { /* the buffers the last call left, emptied */
        self->busy = 1;
        c.blocks = self->blocks, c.digests = self->digests;
        c.pool = self->pool, c.pool_cap = self->pool_cap;
    }
    c.table = self->table;
    c.rules = self->rules;
    c.securities = self->securities;
    c.depth = self->table->depth;
    c.max_prices = self->max_prices;
    PyObject *result = NULL;
    if (pos < 0 || pos > frame.len || c.source_stream < 0 || c.source_stream > 0xFFFF) {
        PyErr_SetString(PyExc_ValueError, "pos or source_stream out of range");
        goto done;
    }
    if (want_payloads && (c.payloads = PyList_New(0)) == NULL) goto done;
    int stop = fx_messages(&c, frame.buf, frame.len, &pos);
    if (stop < 0) goto done;
    result = run_result(pos, c.count, stop, &c.blocks, c.first_seq, &c.digests, c.payloads);
done: /* what was committed stays committed, whatever stopped the run */
    Py_XDECREF(c.payloads);
    fx_keep_buffers(self, &c, borrowed);
    PyBuffer_Release(&frame);
    return result;
}

/* A type's name (dictionary.TYPE_CHECKS' keys) as FX_T_*: the value, or -1 with ValueError. */
static int fx_type_of(const char *name) {
    static const char *names[] = {"int", "seqnum", "price", "qty", "char", "string", "timestamp", "time", "date"};
    for (int i = 0; i < 9; i++) {
        if (strcmp(name, names[i]) == 0) return FX_T_INT + i;
    }
    PyErr_Format(PyExc_ValueError, "unknown field type %.40s", name);
    return -1;
}

/* The rules from fix44/native.py's fix44_rules: (fields, roles), fields a sequence of (tag, type,
 * values or None: a char field's one-character values as one string), roles of (kind "X" or "W", tag, "head", "entry" or "stop"). 0, or -1. */
static int fx_rules_from(PyObject *spec, FxRules *r) {
    PyObject *fields, *roles;
    if (!PyArg_ParseTuple(spec, "OO:rules", &fields, &roles)) return -1;
    PyObject *seq = PySequence_Fast(fields, "rules' fields are a sequence");
    for (Py_ssize_t i = 0; seq != NULL && i < PySequence_Fast_GET_SIZE(seq); i++) {
        int tag, type;
        const char *type_name, *values = NULL;
        if (!PyArg_ParseTuple(PySequence_Fast_GET_ITEM(seq, i), "isz:field", &tag, &type_name, &values) ||
            (type = fx_type_of(type_name)) < 0 || (tag < 0 || tag >= FX_RULE_TAGS ? (PyErr_SetString(PyExc_ValueError, "a tag past FX_RULE_TAGS"), 1) : 0))
            goto fail;
        r->type[tag] = (uint8_t)type;
        for (int ch = 0x20; ch < 0x7F; ch++) { /* printable ASCII: the values given, or any */
            if (values == NULL || strchr(values, ch) != NULL)
                r->chars[tag][ch >> 6] |= 1ULL << (ch & 63);
        }
    }
    Py_XDECREF(seq);
    seq = PySequence_Fast(roles, "rules' roles are a sequence");
    for (Py_ssize_t i = 0; seq != NULL && i < PySequence_Fast_GET_SIZE(seq); i++) {
        int tag;
        const char *kind, *role;
        if (!PyArg_ParseTuple(PySequence_Fast_GET_ITEM(seq, i), "sis:role", &kind, &tag, &role)) goto fail;
        int k = strcmp(kind, "W") == 0 ? FX_KIND_W : strcmp(kind, "X") == 0 ? FX_KIND_X : -1;
        int code = strcmp(role, "head") == 0 ? FX_ROLE_HEAD : strcmp(role, "entry") == 0 ? FX_ROLE_ENTRY
                 : strcmp(role, "stop") == 0 ? FX_ROLE_STOP : -1;
        if (k < 0 || code < 0 || tag < 0 || tag >= FX_RULE_TAGS || r->type[tag] == FX_T_NONE) {
            PyErr_Format(PyExc_ValueError, "a bad role: %.4s %d %.8s", kind, tag, role);
            goto fail;
        }
        r->role[k][tag] = (uint8_t)code;
    }
    Py_XDECREF(seq);
    return seq == NULL ? -1 : 0;
fail:
    Py_XDECREF(seq);
    return -1;
}

static PyObject *Fix44Run_new(PyTypeObject *type, PyObject *args, PyObject *kwds) {
    static char *kwlist[] = {"table", "max_prices", "rules", "securities", NULL};
    PyObject *table, *spec, *securities = NULL;
    Py_ssize_t max_prices;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "O!nO|O!:Fix44Run", kwlist, &BookTableType, &table, &max_prices, &spec,
                                     &PyDict_Type, &securities))
        return NULL;
    if (max_prices < 0) {
        PyErr_SetString(PyExc_ValueError, "max_prices must not be negative");
        return NULL;
    }
    FxRules *rules = PyMem_Calloc(1, sizeof *rules);
    if (rules == NULL) return PyErr_NoMemory();
    if (fx_rules_from(spec, rules) < 0) {
        PyMem_Free(rules);
        return NULL;
    }
    Fix44RunObject *self = (Fix44RunObject *)type->tp_alloc(type, 0);
    if (self == NULL) {
        PyMem_Free(rules);
        return NULL;
    }
    self->table = (BookTableObject *)Py_NewRef(table);
    self->max_prices = max_prices;
    self->rules = rules;
    if (securities != NULL && PyDict_GET_SIZE(securities) > 0 && (self->securities = PyDict_Copy(securities)) == NULL) {
        Py_DECREF(self);
        return NULL;
    }
    return (PyObject *)self;
}

static void Fix44Run_dealloc(Fix44RunObject *self) {
    Py_XDECREF(self->table);
    Py_XDECREF(self->securities);
    PyMem_Free(self->rules);
    PyMem_Free(self->blocks.data);
    PyMem_Free(self->digests.data);
    PyMem_Free(self->pool);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyMethodDef Fix44Run_methods[] = {
    {"run", (PyCFunction)Fix44Run_run, METH_VARARGS, Fix44Run_run_doc},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject Fix44RunType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "feedha.adapter.conversion._orders.Fix44Run",
    .tp_basicsize = sizeof(Fix44RunObject),
    .tp_dealloc = (destructor)Fix44Run_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Fix44Run(table, max_prices, rules): fix44 runs of 35=X and 35=W in C over a BookTable.",
    .tp_new = Fix44Run_new,
    .tp_methods = Fix44Run_methods,
};
