/*
 * SipHash-1-3 under a per-process random key: the hash of every C table keyed by input.
 *
 * A table keyed by what a venue sends (order references, symbols) is a target: with a
 * fixed hash a sender who knows it picks keys that all land in one slot, and n adds cost
 * O(n^2) probes. SipHash is a keyed pseudo-random function (Aumasson and Bernstein, 2012;
 * CPython hashes str and bytes with the same 1-3 variant since 3.11): without the key, a
 * sender cannot choose colliding keys any better than at random. The key comes from
 * os.urandom when the extension is imported (sip_key_init), so it differs from process to
 * process. It decides where a record sits in a table and nothing else: no digest, block,
 * snapshot or journal depends on a table's layout (iteration in slot order is never
 * output unsorted), so adapters of one group agree byte for byte with different keys.
 *
 * Each extension that includes this header has its own key (static storage).
 */
#ifndef FEEDHA_SIPHASH_H
#define FEEDHA_SIPHASH_H

#include <Python.h>
#include <stdint.h>
#include <string.h>

static uint64_t sip_k0, sip_k1; /* this process's key (sip_key_init) */

#define SIP_ROTL(x, b) (uint64_t)(((x) << (b)) | ((x) >> (64 - (b))))
#define SIP_ROUND(v0, v1, v2, v3)                                                                  \
    do {                                                                                           \
        v0 += v1;                                                                                  \
        v1 = SIP_ROTL(v1, 13);                                                                     \
        v1 ^= v0;                                                                                  \
        v0 = SIP_ROTL(v0, 32);                                                                     \
        v2 += v3;                                                                                  \
        v3 = SIP_ROTL(v3, 16);                                                                     \
        v3 ^= v2;                                                                                  \
        v0 += v3;                                                                                  \
        v3 = SIP_ROTL(v3, 21);                                                                     \
        v3 ^= v0;                                                                                  \
        v2 += v1;                                                                                  \
        v1 = SIP_ROTL(v1, 17);                                                                     \
        v1 ^= v2;                                                                                  \
        v2 = SIP_ROTL(v2, 32);                                                                     \
    } while (0)

static inline uint64_t sip_le64(const uint8_t *p) {
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--) v = (v << 8) | p[i];
    return v;
}

/* SipHash-1-3 of ``len`` bytes under the key (k0, k1): one compression round a block, three to finish. */
static inline uint64_t siphash13(uint64_t k0, uint64_t k1, const uint8_t *in, size_t len) {
    uint64_t v0 = k0 ^ 0x736f6d6570736575ULL, v1 = k1 ^ 0x646f72616e646f6dULL;
    uint64_t v2 = k0 ^ 0x6c7967656e657261ULL, v3 = k1 ^ 0x7465646279746573ULL;
    size_t whole = len & ~(size_t)7;
    for (size_t i = 0; i < whole; i += 8) {
        uint64_t m = sip_le64(in + i);
        v3 ^= m;
        SIP_ROUND(v0, v1, v2, v3);
        v0 ^= m;
    }
    uint64_t b = (uint64_t)len << 56;
    for (size_t i = 0; i < (len & 7); i++) b |= (uint64_t)in[whole + i] << (8 * i);
    v3 ^= b;
    SIP_ROUND(v0, v1, v2, v3);
    v0 ^= b;
    v2 ^= 0xff;
    SIP_ROUND(v0, v1, v2, v3);
    SIP_ROUND(v0, v1, v2, v3);
    SIP_ROUND(v0, v1, v2, v3);
    return v0 ^ v1 ^ v2 ^ v3;
}

/* SipHash-1-3 of a u64's 8 little-endian bytes under this process's key (siphash13, unrolled). */
static inline uint64_t sip_u64(uint64_t m) {
    uint64_t v0 = sip_k0 ^ 0x736f6d6570736575ULL, v1 = sip_k1 ^ 0x646f72616e646f6dULL;
    uint64_t v2 = sip_k0 ^ 0x6c7967656e657261ULL, v3 = sip_k1 ^ 0x7465646279746573ULL;
    const uint64_t b = (uint64_t)8 << 56;
    v3 ^= m;
    SIP_ROUND(v0, v1, v2, v3);
    v0 ^= m;
    v3 ^= b;
    SIP_ROUND(v0, v1, v2, v3);
    v0 ^= b;
    v2 ^= 0xff;
    SIP_ROUND(v0, v1, v2, v3);
    SIP_ROUND(v0, v1, v2, v3);
    SIP_ROUND(v0, v1, v2, v3);
    return v0 ^ v1 ^ v2 ^ v3;
}

/* SipHash-1-3 of bytes under this process's key. */
static inline uint64_t sip_bytes(const void *in, size_t len) { return siphash13(sip_k0, sip_k1, (const uint8_t *)in, len); }

/* This process's key from os.urandom(16) (the module's init calls it once): 0, or -1 with an exception. */
static int sip_key_init(void) {
    PyObject *os = PyImport_ImportModule("os");
    PyObject *key = os == NULL ? NULL : PyObject_CallMethod(os, "urandom", "i", 16);
    Py_XDECREF(os);
    if (key == NULL) return -1;
    int rc = PyBytes_Check(key) && PyBytes_GET_SIZE(key) == 16 ? 0 : -1;
    if (rc == 0) {
        const uint8_t *p = (const uint8_t *)PyBytes_AS_STRING(key);
        sip_k0 = sip_le64(p);
        sip_k1 = sip_le64(p + 8);
    } else {
        PyErr_SetString(PyExc_RuntimeError, "os.urandom(16) did not give 16 bytes");
    }
    Py_DECREF(key);
    return rc;
}

#endif /* FEEDHA_SIPHASH_H */
