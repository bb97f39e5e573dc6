/*
 * FIX's CheckSum (tag 10): the sum of a message's bytes before its trailer, modulo 256.
 * fix_byte_sum(p, n) is that sum (proto.fix.checksum), eight bytes a step, for both FIX
 * engines (_fastpath.c and _orders.c).
 *
 * A step adds a word's even and its odd bytes into four 16-bit lanes, at most 2 x 255 a
 * lane. A round of at most FIX_SUM_ROUND_WORDS steps cannot carry out of a lane
 * (128 x 510 < 2^16): a carry into the next lane would add one to that lane's low byte,
 * which is all the checksum keeps. Each round's lanes are added into the total before
 * the next round starts.
 */
#ifndef FEEDHA_FIX_CHECKSUM_H
#define FEEDHA_FIX_CHECKSUM_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define FIX_SUM_ROUND_WORDS 128

static inline unsigned fix_byte_sum(const uint8_t *p, size_t n) {
    const uint64_t even = 0x00FF00FF00FF00FFULL;
    uint64_t total = 0;
    size_t i = 0;
    while (n - i >= 8) {
        size_t words = (n - i) / 8;
        if (words > FIX_SUM_ROUND_WORDS) words = FIX_SUM_ROUND_WORDS;
        uint64_t lanes = 0;
        for (size_t w = 0; w < words; w++, i += 8) {
            uint64_t x;
            memcpy(&x, p + i, 8);
            lanes += (x & even) + ((x >> 8) & even);
        }
        lanes = (lanes & 0x0000FFFF0000FFFFULL) + ((lanes >> 16) & 0x0000FFFF0000FFFFULL);
        total += (lanes & 0xFFFFFFFFULL) + (lanes >> 32);
    }
    for (; i < n; i++) total += p[i];
    return (unsigned)(total & 0xFF);
}

#endif
