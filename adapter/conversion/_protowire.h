/*
 * Protobuf wire primitives for the C extensions of adapter/conversion: a growable
 * output buffer, varints and little-endian doubles, as the protobuf runtime writes
 * them; and the big-endian integers and block header of feedha's own wire format
 * (proto/wire.py). Included by _fastpath.c and _orders.c (each gets its own static copy);
 * the varints are _varint.h's.
 */
#ifndef FEEDHA_PROTOWIRE_H
#define FEEDHA_PROTOWIRE_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <stdint.h>
#include <string.h>

#include "_conversion_constants.h" /* BLOCK_LENGTH_COVERS, BLOCK_OVERHEAD */
#include "_varint.h"             /* put_varint, varint_size */

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
#define PROTOWIRE_LITTLE_ENDIAN 1 /* one store a u64 below (gcc -O2 keeps the byte loops as loops) */
#else
#define PROTOWIRE_LITTLE_ENDIAN 0
#endif

/* A u64 as struct's ">Q" packs it. */
static inline void put_be64(uint8_t *p, uint64_t v) {
#if PROTOWIRE_LITTLE_ENDIAN
    v = __builtin_bswap64(v);
    memcpy(p, &v, 8);
#else
    for (int i = 7; i >= 0; i--) {
        p[i] = (uint8_t)v;
        v >>= 8;
    }
#endif
}

/* proto/wire.py's block header: u16 length (payload + 10), u16 source_stream, u64 source_seq. */
static inline void put_block_header(uint8_t *b, size_t payload_len, int source_stream, uint64_t source_seq) {
    unsigned length = (unsigned)payload_len + BLOCK_LENGTH_COVERS;
    b[0] = (uint8_t)(length >> 8);
    b[1] = (uint8_t)length;
    b[2] = (uint8_t)(source_stream >> 8);
    b[3] = (uint8_t)source_stream;
    put_be64(b + 4, source_seq);
}

/* The payload of the block whose header is at b, appended to payloads (a list; NULL: nobody
 * keeps them) as bytes, for the journal: 0, or -1 with an exception. */
static inline int keep_payload(PyObject *payloads, const uint8_t *b, size_t payload_len) {
    if (payloads == NULL) return 0;
    PyObject *item = PyBytes_FromStringAndSize((const char *)b + BLOCK_OVERHEAD, (Py_ssize_t)payload_len);
    if (item == NULL) return -1;
    int rc = PyList_Append(payloads, item);
    Py_DECREF(item);
    return rc;
}

static inline uint64_t dbits(double d) {
    uint64_t u;
    memcpy(&u, &d, 8);
    return u;
}

typedef struct {
    uint8_t *data;
    size_t len, cap;
} Buf;

static inline int buf_reserve(Buf *b, size_t more) {
    if (b->len + more <= b->cap) return 0;
    size_t cap = b->cap ? b->cap : 4096;
    while (cap < b->len + more) cap *= 2;
    uint8_t *data = PyMem_Realloc(b->data, cap);
    if (data == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    b->data = data;
    b->cap = cap;
    return 0;
}

/* A double as protobuf's fixed64: its IEEE 754 bits, little-endian. */
static inline uint8_t *put_double(uint8_t *p, double d) {
#if PROTOWIRE_LITTLE_ENDIAN
    memcpy(p, &d, 8);
    return p + 8;
#else
    uint64_t u = dbits(d);
    for (int i = 0; i < 8; i++) {
        *p++ = (uint8_t)u;
        u >>= 8;
    }
    return p;
#endif
}

#endif /* FEEDHA_PROTOWIRE_H */
