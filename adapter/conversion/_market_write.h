/*
 * The field writers of proto/market.proto's messages: how the C extensions write
 * MarketUpdate bytes, one way. Included by adapter/conversion/_orders.c (and so by its
 * parts, adapter/formats/itch50/_mbo_run.c and adapter/formats/fix44/_fix44_run.c) and by
 * adapter/formats/feedha_fix/_fastpath.c. The Python reference they are compared with,
 * byte for byte, is adapter/conversion/codec.py (tests/unit/adapter/test_fastpath.py,
 * test_orders_native.py, test_mbo_run.py) and fix44's wire.py, itself compared with
 * the protobuf runtime (test_fix44_wire.py, test_fix44_run.py).
 *
 * Theory of operation
 * -------------------
 * Deterministic protobuf, as the runtime writes it with deterministic=True:
 * fields in number order, a proto3 integer left out at 0, a double left out
 * when its bits are 0 (so -0.0 is written), every tag one byte (field numbers
 * 1..15: scripts/gen_proto.py refuses a schema where that no longer holds).
 * Two kinds of writer:
 *
 *   put_*    at a pointer, into room the caller reserved; each returns the end.
 *            A length the caller knows (put_length), or a body under 128 bytes
 *            whose one length byte is written after it (put_small_close: put_entry,
 *            put_book_level; put_state_values writes SymbolState's nine values,
 *            the caller closes).
 *   w_*      onto a growing Buf (_protowire.h): 0, or -1 with MemoryError. A
 *            length-delimited field is opened before its body and closed after:
 *            w_small_open/w_small_close for a body under 128 bytes (nothing moves),
 *            w_open/w_end for one that may pass it (a body of 128 bytes to 16 KiB
 *            moves nothing, a shorter one moves back a byte), w_close for a body
 *            already written (it moves the body up behind its tag and length).
 *
 * Every extension gets its own copy of each, and none keeps state. The put_*
 * writers are static inline (each a few instructions at its call); the w_* are
 * static and marked maybe-unused (an extension that writes into reserved room
 * only, as _fastpath.c does, leaves them out without a warning), so the compiler
 * inlines them where it judges it pays, as it did when they were _orders.c's:
 * declared inline, every call of them was (11 KB more code in _orders, and
 * Fix44Run's parser no longer inlined into its run).
 */
#ifndef FEEDHA_MARKET_WRITE_H
#define FEEDHA_MARKET_WRITE_H

#include <stdint.h>
#include <string.h>

#include "_market_fields.h" /* the tags, generated from proto/market.proto by scripts/gen_proto.py */
#include "_protowire.h"     /* Buf, buf_reserve, dbits, put_double */
#include "_varint.h"        /* put_varint, varint_size */

/* ---- at a pointer, into reserved room ---- */

/* An int64/enum field's bytes: none at zero. */
static inline size_t varint_field_size(uint64_t v) { return v ? 1 + varint_size(v) : 0; }

static inline uint8_t *put_varint_field(uint8_t *p, uint8_t tag, uint64_t v) {
    if (v) {
        *p++ = tag;
        p = put_varint(p, v);
    }
    return p;
}

/* A double field's bytes: none when its bits are zero. */
static inline size_t double_field_size(double d) { return dbits(d) ? 9 : 0; }

static inline uint8_t *put_double_field(uint8_t *p, uint8_t tag, double d) {
    if (dbits(d)) {
        *p++ = tag;
        p = put_double(p, d);
    }
    return p;
}

/* A length-delimited field's tag and length; its body follows. */
static inline uint8_t *put_length(uint8_t *p, uint8_t tag, size_t len) {
    *p++ = tag;
    return put_varint(p, len);
}

/* Field ``tag`` made of the body written since ``head`` + 2 (under 128 bytes): the end. */
static inline uint8_t *put_small_close(uint8_t *head, uint8_t *end, uint8_t tag) {
    head[0] = tag;
    head[1] = (uint8_t)(end - head - 2);
    return end;
}

#define ENTRY_ROOM 42 /* an Entry's most bytes: tag, length, 11 + 9 + 11 + 9 of body */

/* One Entry {type, price, size, notional} as field ``tag`` (MarketUpdate.entries,
 * SymbolUpdate.trades): the end. */
static inline uint8_t *put_entry(uint8_t *p, uint8_t tag, uint64_t type, double price, int64_t size,
                                 double notional) {
    uint8_t *head = p;
    p = put_varint_field(p + 2, FH_ENTRY_TYPE_TAG, type);
    p = put_double_field(p, FH_ENTRY_PRICE_TAG, price);
    p = put_varint_field(p, FH_ENTRY_SIZE_TAG, (uint64_t)size);
    p = put_double_field(p, FH_ENTRY_NOTIONAL_TAG, notional);
    return put_small_close(head, p, tag);
}

#define BOOK_LEVEL_ROOM 31 /* a BookLevel's most bytes: tag, length, 9 + 9 + 11 of body */

/* One BookLevel {price, size, orders} as field ``tag`` (Book.bids, Book.asks): the end. */
static inline uint8_t *put_book_level(uint8_t *p, uint8_t tag, double price, double size, int64_t orders) {
    uint8_t *head = p;
    p = put_double_field(p + 2, FH_BOOKLEVEL_PRICE_TAG, price);
    p = put_double_field(p, FH_BOOKLEVEL_SIZE_TAG, size);
    p = put_varint_field(p, FH_BOOKLEVEL_ORDERS_TAG, (uint64_t)orders);
    return put_small_close(head, p, tag);
}

#define STATE_VALUES_ROOM 85 /* SymbolState's nine values' most bytes: 11 + 4 * 9 + 11 + 3 * 9 */

/* SymbolState's nine values, fields 1-9 (SymbolValues: the whole of MarketUpdate.state, the
 * head of SymbolUpdate.state): the end. */
static inline uint8_t *put_state_values(uint8_t *p, int64_t volume, double high, double low, double last,
                                        double vwap, int64_t trade_count, double bid, double ask,
                                        double notional) {
    p = put_varint_field(p, FH_SYMBOLSTATE_VOLUME_TAG, (uint64_t)volume);
    p = put_double_field(p, FH_SYMBOLSTATE_HIGH_TAG, high);
    p = put_double_field(p, FH_SYMBOLSTATE_LOW_TAG, low);
    p = put_double_field(p, FH_SYMBOLSTATE_LAST_TAG, last);
    p = put_double_field(p, FH_SYMBOLSTATE_VWAP_TAG, vwap);
    p = put_varint_field(p, FH_SYMBOLSTATE_TRADE_COUNT_TAG, (uint64_t)trade_count);
    p = put_double_field(p, FH_SYMBOLSTATE_BID_TAG, bid);
    p = put_double_field(p, FH_SYMBOLSTATE_ASK_TAG, ask);
    return put_double_field(p, FH_SYMBOLSTATE_NOTIONAL_TAG, notional);
}

/* ---- onto a Buf ---- */

#if defined(__GNUC__)
#define W_MAYBE_UNUSED __attribute__((unused))
#else
#define W_MAYBE_UNUSED
#endif

static W_MAYBE_UNUSED int w_raw(Buf *b, const void *p, size_t n) {
    if (buf_reserve(b, n) < 0) return -1;
    memcpy(b->data + b->len, p, n);
    b->len += n;
    return 0;
}

static W_MAYBE_UNUSED int w_varint(Buf *b, uint8_t tag, uint64_t v) { /* a proto3 integer: left out at 0 */
    if (v == 0) return 0;
    if (buf_reserve(b, 11) < 0) return -1;
    b->len = (size_t)(put_varint_field(b->data + b->len, tag, v) - b->data);
    return 0;
}

/* A double field: left out when its bits are 0, unless ``always`` (an optional value that is set). */
static W_MAYBE_UNUSED int w_double(Buf *b, uint8_t tag, double d, int always) {
    if (!always && dbits(d) == 0) return 0;
    if (buf_reserve(b, 9) < 0) return -1;
    b->data[b->len] = tag;
    b->len = (size_t)(put_double(b->data + b->len + 1, d) - b->data);
    return 0;
}

/* Make [start, len) the body of field ``tag``: its tag and length go in front of it. */
static W_MAYBE_UNUSED int w_close(Buf *b, size_t start, uint8_t tag) {
    size_t body = b->len - start, head = 1 + varint_size(body);
    if (buf_reserve(b, head) < 0) return -1;
    memmove(b->data + start + head, b->data + start, body);
    b->data[start] = tag;
    put_varint(b->data + start + 1, body);
    b->len += head;
    return 0;
}

/* A field whose body is under 128 bytes: its tag and length reserved in front, written at the close. */
static W_MAYBE_UNUSED int w_small_open(Buf *b, size_t *start) {
    if (buf_reserve(b, 2) < 0) return -1;
    *start = b->len;
    b->len += 2;
    return 0;
}

static W_MAYBE_UNUSED int w_small_close(Buf *b, size_t start, uint8_t tag) {
    put_small_close(b->data + start, b->data + b->len, tag);
    return 0;
}

/* A field whose body may pass 127 bytes: its tag and two length bytes reserved in front. */
static W_MAYBE_UNUSED int w_open(Buf *b, size_t *start) {
    if (buf_reserve(b, 3) < 0) return -1;
    *start = b->len;
    b->len += 3;
    return 0;
}

static W_MAYBE_UNUSED int w_end(Buf *b, size_t start, uint8_t tag) {
    size_t body = b->len - start - 3, head = 1 + varint_size(body);
    if (head != 3) {
        if (head > 3 && buf_reserve(b, head - 3) < 0) return -1;
        memmove(b->data + start + head, b->data + start + 3, body);
        b->len = start + head + body;
    }
    b->data[start] = tag;
    put_varint(b->data + start + 1, body);
    return 0;
}

/* An Entry as field ``tag`` (put_entry onto a Buf). */
static W_MAYBE_UNUSED int w_entry(Buf *b, uint8_t tag, uint64_t type, double price, int64_t size, double notional) {
    if (buf_reserve(b, ENTRY_ROOM) < 0) return -1;
    b->len = (size_t)(put_entry(b->data + b->len, tag, type, price, size, notional) - b->data);
    return 0;
}

/* A BookLevel as field ``tag`` (put_book_level onto a Buf). */
static W_MAYBE_UNUSED int w_book_level(Buf *b, uint8_t tag, double price, double size, int64_t orders) {
    if (buf_reserve(b, BOOK_LEVEL_ROOM) < 0) return -1;
    b->len = (size_t)(put_book_level(b->data + b->len, tag, price, size, orders) - b->data);
    return 0;
}

#endif /* FEEDHA_MARKET_WRITE_H */
