/*
 * Protobuf varints, as the protobuf runtime writes them: the low seven bits first, the top bit
 * set on every byte but the last. No other dependency, so that any extension may include it:
 * _protowire.h (for _fastpath.c and _orders.c) and adapter/_pump.c (the heartbeat report).
 */
#ifndef FEEDHA_VARINT_H
#define FEEDHA_VARINT_H

#include <stddef.h>
#include <stdint.h>

/* Write v at p; returns the byte after it. */
static inline uint8_t *put_varint(uint8_t *p, uint64_t v) {
    while (v >= 0x80) {
        *p++ = (uint8_t)(v | 0x80);
        v >>= 7;
    }
    *p++ = (uint8_t)v;
    return p;
}

static inline size_t varint_size(uint64_t v) {
    size_t n = 1;
    while (v >= 0x80) {
        v >>= 7;
        n++;
    }
    return n;
}

#endif
