/*
 * feedha.client._blocks: the arbiter's fast path over a live packet's blocks, in C.
 *
 * Theory of operation
 * -------------------
 * client_lib/_live_blocks.py read_live_blocks_reference is the specification:
 * read_live_blocks here returns what it returns for every input, and
 * tests/unit/client_lib/test_live_blocks.py compares the two on packets that
 * hypothesis writes (well formed, cut short, with bad lengths and tombstones).
 *
 * A healthy channel's packets are either copies of what was delivered or the
 * next msg_seqs in order. The walk reads each block header (">HHQ": length,
 * source_stream, source_seq; the length covers stream, seq and payload),
 * keeps every block's stream and source_seq, and builds a Delivery for each
 * block from next_seq on without running its __init__: the object is
 * allocated as object.__new__ would and its slots are stored through the
 * offsets of the class's own slot descriptors, looked up once a call. It
 * changes no state, so when a block is malformed or a tombstone, or the
 * blocks do not end exactly at the packet's end, it returns None and the
 * arbiter's general path (feedha.proto.wire.decode_blocks) names the fault.
 *
 * Every read is bounded by the packet's length: a block header is read only
 * when all 12 of its bytes are inside the packet.
 *
 * read_int64_field reads one integer field of a delivery's payload without
 * decoding the rest (Delivery.event_time_ns); its specification is
 * client_lib/_payload_fields.py read_int64_field_reference, and
 * tests/unit/client_lib/test_payload_fields.py compares the two and the
 * protobuf runtime. Every read stays inside [start, end).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>

#include <stdint.h>
#include <string.h>

#include "_blocks_constants.h" /* HEADER_SIZE, BLOCK_OVERHEAD (length, stream, source_seq: 2 + 2 + 8),
                                  TOMBSTONE_STREAM: generated from proto/wire.py by
                                  scripts/gen_constants.py */

#define MIN_BLOCK_LENGTH (BLOCK_OVERHEAD - 2) /* the length field covers stream and seq */

/* The Delivery slots the walk stores (client_lib/events.py Delivery.__slots__), by index into
   field_names. _update is None until the payload is decoded: stored, not left unset, because
   reading an unset slot raises and Delivery.update would catch that once a message (~1.4 us). */
enum {
    F_CHANNEL, F_MSG_SEQ, F_SOURCE_STREAM, F_SOURCE_SEQ, F_LINE, F_TERM, F_SEND_TIME, F_PACKET, F_START, F_END, F_UPDATE,
    F_N
};
static const char *const field_names[F_N] = {"channel", "msg_seq",      "source_stream", "source_seq",
                                             "line",    "term",         "send_time_ns",  "_packet",
                                             "_start",  "_end",         "_update"};

/* Where each slot of kind lives in its instances: 0, or -1 with an exception. A descriptor
   counts only when it is a writable object slot of kind or of a base of kind: a slot descriptor
   of another class, put on kind under one of these names, has an offset into another layout. */
static int slot_offsets(PyTypeObject *kind, Py_ssize_t offsets[F_N]) {
    for (int i = 0; i < F_N; i++) {
        PyObject *descr = PyObject_GetAttrString((PyObject *)kind, field_names[i]);
        if (descr == NULL) {
            if (!PyErr_ExceptionMatches(PyExc_AttributeError)) return -1;
            PyErr_Clear();
        }
        int ok = descr != NULL && Py_IS_TYPE(descr, &PyMemberDescr_Type) &&
                 PyType_IsSubtype(kind, PyDescr_TYPE(descr));
        PyMemberDef *member = ok ? ((PyMemberDescrObject *)descr)->d_member : NULL;
        ok = ok && member->type == T_OBJECT_EX && !(member->flags & READONLY);
        if (ok) offsets[i] = member->offset;
        Py_XDECREF(descr);
        if (!ok) {
            PyErr_Format(PyExc_TypeError, "%s.%s is not a writable slot", kind->tp_name, field_names[i]);
            return -1;
        }
    }
    return 0;
}

static inline void store(PyObject *obj, Py_ssize_t offset, PyObject *value) {
    /* A fresh object's slots are NULL (tp_alloc zeroes it): nothing to release. */
    *(PyObject **)((char *)obj + offset) = value;
}

static inline unsigned read_u16(const unsigned char *p) { return ((unsigned)p[0] << 8) | p[1]; }

/* A big-endian u64: one load and a byte swap on a little-endian machine (gcc -O2 keeps the
   byte loop a loop). */
static inline unsigned long long read_u64(const unsigned char *p) {
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    uint64_t v;
    memcpy(&v, p, 8);
    return __builtin_bswap64(v);
#else
    unsigned long long v = 0;
    for (int i = 0; i < 8; i++) v = (v << 8) | p[i];
    return v;
#endif
}

/* Append a new reference to a list: 0, or -1 with an exception (the reference is dropped either way). */
static int append_new(PyObject *list, PyObject *item) {
    if (item == NULL) return -1;
    int failed = PyList_Append(list, item);
    Py_DECREF(item);
    return failed;
}

PyDoc_STRVAR(read_live_blocks_doc,
             "read_live_blocks(packet, next_seq, first, count, below, stamp)\n"
             "--\n\n"
             "Read a live packet whose first ``below`` blocks are copies and the rest the next to deliver\n"
             "(client_lib/_live_blocks.py read_live_blocks_reference: the same arguments and result).");

static PyObject *read_live_blocks(PyObject *Py_UNUSED(module), PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 6) {
        PyErr_Format(PyExc_TypeError, "read_live_blocks takes 6 arguments (%zd given)", nargs);
        return NULL;
    }
    PyObject *packet = args[0], *stamp = args[5];
    if (!PyBytes_Check(packet)) {
        PyErr_SetString(PyExc_TypeError, "packet must be bytes");
        return NULL;
    }
    if (!PyTuple_Check(stamp) || PyTuple_GET_SIZE(stamp) != 5 || !PyType_Check(PyTuple_GET_ITEM(stamp, 0))) {
        PyErr_SetString(PyExc_TypeError, "stamp must be (kind, channel, line, term, send_time_ns)");
        return NULL;
    }
    unsigned long long next_seq = PyLong_AsUnsignedLongLong(args[1]);
    unsigned long long first = PyLong_AsUnsignedLongLong(args[2]);
    Py_ssize_t count = PyLong_AsSsize_t(args[3]), below = PyLong_AsSsize_t(args[4]);
    if (PyErr_Occurred()) {
        if (!PyErr_ExceptionMatches(PyExc_OverflowError)) return NULL;
        PyErr_Clear(); /* a number beyond 64 bits: the general path names it */
        Py_RETURN_NONE;
    }
    if (count < 0 || below < 0 || first > ULLONG_MAX - (unsigned long long)count) Py_RETURN_NONE;
    unsigned long long end_seq = first + (unsigned long long)count; /* range(next_seq, first + count) */

    PyTypeObject *kind = (PyTypeObject *)PyTuple_GET_ITEM(stamp, 0);
    PyObject *channel = PyTuple_GET_ITEM(stamp, 1), *line = PyTuple_GET_ITEM(stamp, 2);
    PyObject *term = PyTuple_GET_ITEM(stamp, 3), *send_time = PyTuple_GET_ITEM(stamp, 4);
    Py_ssize_t offsets[F_N];
    if (next_seq < end_seq && slot_offsets(kind, offsets) < 0) return NULL;

    const unsigned char *data = (const unsigned char *)PyBytes_AS_STRING(packet);
    Py_ssize_t size = PyBytes_GET_SIZE(packet), offset = HEADER_SIZE;
    PyObject *streams = PyList_New(0), *source_seqs = PyList_New(0), *deliveries = PyList_New(0);
    if (streams == NULL || source_seqs == NULL || deliveries == NULL) goto fail;

    for (Py_ssize_t i = 0; i < below; i++) {
        if (offset > size - BLOCK_OVERHEAD) goto decline; /* the header runs past the end */
        const unsigned char *p = data + offset;
        unsigned length = read_u16(p);
        if (length < MIN_BLOCK_LENGTH) goto decline;
        if (append_new(streams, PyLong_FromUnsignedLong(read_u16(p + 2))) < 0 ||
            append_new(source_seqs, PyLong_FromUnsignedLongLong(read_u64(p + 4))) < 0)
            goto fail;
        offset += 2 + (Py_ssize_t)length;
    }
    for (unsigned long long seq = next_seq; seq < end_seq; seq++) {
        if (offset > size - BLOCK_OVERHEAD) goto decline;
        const unsigned char *p = data + offset;
        unsigned length = read_u16(p), stream_number = read_u16(p + 2);
        if (length < MIN_BLOCK_LENGTH || stream_number == TOMBSTONE_STREAM) goto decline;
        Py_ssize_t end = offset + 2 + (Py_ssize_t)length;
        PyObject *stream = PyLong_FromUnsignedLong(stream_number);
        PyObject *source_seq = PyLong_FromUnsignedLongLong(read_u64(p + 4));
        PyObject *msg_seq = PyLong_FromUnsignedLongLong(seq);
        PyObject *start = PyLong_FromSsize_t(offset + BLOCK_OVERHEAD), *stop = PyLong_FromSsize_t(end);
        PyObject *delivery = NULL;
        if (stream && source_seq && msg_seq && start && stop) delivery = kind->tp_alloc(kind, 0);
        if (delivery == NULL) {
            Py_XDECREF(stream);
            Py_XDECREF(source_seq);
            Py_XDECREF(msg_seq);
            Py_XDECREF(start);
            Py_XDECREF(stop);
            goto fail;
        }
        store(delivery, offsets[F_CHANNEL], Py_NewRef(channel));
        store(delivery, offsets[F_MSG_SEQ], msg_seq);
        store(delivery, offsets[F_SOURCE_STREAM], Py_NewRef(stream));
        store(delivery, offsets[F_SOURCE_SEQ], Py_NewRef(source_seq));
        store(delivery, offsets[F_LINE], Py_NewRef(line));
        store(delivery, offsets[F_TERM], Py_NewRef(term));
        store(delivery, offsets[F_SEND_TIME], Py_NewRef(send_time));
        store(delivery, offsets[F_PACKET], Py_NewRef(packet));
        store(delivery, offsets[F_START], start);
        store(delivery, offsets[F_END], stop);
        store(delivery, offsets[F_UPDATE], Py_NewRef(Py_None));
        if (append_new(deliveries, delivery) < 0 || append_new(streams, stream) < 0 ||
            append_new(source_seqs, source_seq) < 0)
            goto fail;
        offset = end;
    }
    if (offset != size) goto decline;
    return Py_BuildValue("(NNN)", streams, source_seqs, deliveries);

decline: /* malformed, a tombstone, or not ending at the packet's end: the general path takes it */
    Py_DECREF(streams);
    Py_DECREF(source_seqs);
    Py_DECREF(deliveries);
    Py_RETURN_NONE;
fail:
    Py_XDECREF(streams);
    Py_XDECREF(source_seqs);
    Py_XDECREF(deliveries);
    return NULL;
}

/* ---- one integer field of a payload: read_int64_field (client_lib/_payload_fields.py) ---- */

/* The varint at *pos, at most limit bytes and inside end: 1 read (bits beyond 64 dropped, as
   the protobuf runtime drops them), 0 not plain. */
static int read_varint(const unsigned char *p, Py_ssize_t *pos, Py_ssize_t end, int limit, uint64_t *value) {
    uint64_t v = 0;
    Py_ssize_t i = *pos, stop = end - i < limit ? end : i + limit;
    for (int shift = 0; i < stop; i++, shift += 7) {
        v |= shift < 64 ? (uint64_t)(p[i] & 0x7F) << shift : 0;
        if (p[i] < 0x80) {
            *pos = i + 1;
            *value = v;
            return 1;
        }
    }
    return 0;
}

PyDoc_STRVAR(read_int64_field_doc,
             "read_int64_field(packet, start, end, field)\n"
             "--\n\n"
             "The last varint of ``field`` in the protobuf message ``packet[start:end]`` as an int64\n"
             "(0 if absent); None where the walk is not plain (client_lib/_payload_fields.py\n"
             "read_int64_field_reference: the same arguments and result).");

static PyObject *read_int64_field(PyObject *Py_UNUSED(module), PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 4) {
        PyErr_Format(PyExc_TypeError, "read_int64_field takes 4 arguments (%zd given)", nargs);
        return NULL;
    }
    if (!PyBytes_Check(args[0])) Py_RETURN_NONE; /* another buffer: the caller decodes it whole */
    Py_ssize_t start = PyLong_AsSsize_t(args[1]), end = PyLong_AsSsize_t(args[2]);
    long long field = PyLong_AsLongLong(args[3]);
    if (PyErr_Occurred()) {
        if (!PyErr_ExceptionMatches(PyExc_OverflowError)) return NULL;
        PyErr_Clear(); /* beyond any payload or field number: not plain */
        Py_RETURN_NONE;
    }
    const unsigned char *p = (const unsigned char *)PyBytes_AS_STRING(args[0]);
    if (start < 0 || start > end || end > PyBytes_GET_SIZE(args[0])) Py_RETURN_NONE;
    uint64_t value = 0, key, read;
    for (Py_ssize_t pos = start; pos < end;) {
        if (!read_varint(p, &pos, end, 5, &key) || key > 0xFFFFFFFFu || key >> 3 == 0) Py_RETURN_NONE;
        switch (key & 7) {
        case 0: /* varint */
            if (!read_varint(p, &pos, end, 10, &read)) Py_RETURN_NONE;
            if ((long long)(key >> 3) == field) value = read;
            break;
        case 1: /* fixed 64 bits */
            if (end - pos < 8) Py_RETURN_NONE;
            pos += 8;
            break;
        case 5: /* fixed 32 bits */
            if (end - pos < 4) Py_RETURN_NONE;
            pos += 4;
            break;
        case 2: /* length-delimited */
            if (!read_varint(p, &pos, end, 10, &read) || read > (uint64_t)(end - pos)) Py_RETURN_NONE;
            pos += (Py_ssize_t)read;
            break;
        default: /* a group (3, 4) or no wire type (6, 7) */
            Py_RETURN_NONE;
        }
    }
    return PyLong_FromLongLong((long long)value); /* two's complement: an int64 field's value */
}

static PyMethodDef module_methods[] = {
    {"read_live_blocks", (PyCFunction)(void (*)(void))read_live_blocks, METH_FASTCALL, read_live_blocks_doc},
    {"read_int64_field", (PyCFunction)(void (*)(void))read_int64_field, METH_FASTCALL, read_int64_field_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    .m_base = PyModuleDef_HEAD_INIT,
    .m_name = "feedha.client._blocks",
    .m_doc = "The arbiter's fast path over a live packet's blocks, and a payload's single integer fields, in C "
             "(see client_lib/_blocks.c).",
    .m_size = -1,
    .m_methods = module_methods,
};

PyMODINIT_FUNC PyInit__blocks(void) {
    PyObject *m = PyModule_Create(&module);
    if (m == NULL) return NULL;
    if (fh_add_constants(m) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
