/*
 * feedha.adapter._pump: the source pump, an adapter's common turn in C.
 *
 * Theory of operation
 * -------------------
 * In the Python loop (adapter/runner.py) an adapter's common turn is a poll,
 * a receive, the core's stages and a send: ~30 us of interpreter a source
 * frame at one frame a turn, several times what a bare relay spends. The pump
 * is that turn in C. Pump.run drains the source socket, hands each frame to
 * the conversion engine's run function (the same C run the Python path calls:
 * adapter/conversion/engine.py ConversionEngine.run), appends the blocks to a
 * packet and, once nothing more waits (or the packet is full), seals it; then
 * it waits on the adapter's sockets (the GIL released) until its deadline:
 * one poll() of their fds while each has said it has nothing, else zmq_poll.
 * What a sealed packet becomes depends on the mode:
 *
 *   PUMP_MODE_SEND     the active: sent on the line at once (with a journal,
 *                      the records of its messages are appended first to the
 *                      journal writer's live tail, in C: journal_packet);
 *   PUMP_MODE_HOLD     a publishing backup: its packets and journal records
 *                      come back, in order, for the core's output gate;
 *   PUMP_MODE_CONVERT  a backup that does not publish: conversion and
 *                      numbering only, no packet, no record.
 *
 * The pump decides nothing. The core (adapter/core/pumping.py) says when it
 * may run, in which mode, before which source position (stop_seq: the sync
 * rules watch it) and until when; the pump comes back at the first thing that
 * needs a decision:
 *
 *   PUMP_DEADLINE  the deadline came (the core's timers are due);
 *   PUMP_DRAINED   nothing more was queued and it was not to wait for more;
 *   PUMP_SOCKET    the sync bus or the control socket is readable (looked at
 *                  before every frame: the group's word comes first);
 *   PUMP_FRAME     a source message it does not take whole: not two parts,
 *                  a run that stopped at a message (the careful path, or the
 *                  watched position), or a run function that raised (the
 *                  Python path calls it again and quarantines the frame); it
 *                  is handed back with the position the Python path goes on from;
 *   PUMP_BUDGET    max_frames frames, or frames of max_bytes, came in one call
 *                  (bounds: the deadline ends a call under load as well, and
 *                  what it converted is held until the core books it);
 *   PUMP_SIGNAL    a signal interrupted the wait (its Python handler ran);
 *   PUMP_ERROR     something failed; what was done is returned with the error.
 *
 * The active's heartbeat report (proto/sync.proto StreamState, which the sync rules send every
 * heartbeat interval) goes out from here while the pump runs, when the core hands it the
 * report's fixed parts: the core's turn would otherwise end the call every interval, and that
 * turn, ~0.5 ms of interpreter, is the time the active reads no source. Once its time has come
 * (looked at after every frame and while waiting), the packet being filled is sealed and sent
 * (a report covers only what the line carried), and the report goes out on the sync bus with
 * the positions of the last message numbered and the digest after it; the next is due one
 * interval later. The call returns how many it sent and when the last went, and the core
 * books that as the sync rules' last heartbeat (adapter/core/pumping.py settle).
 *
 * A backup whose output waits at its gate reads its source in batches: with
 * batch_ns it drains what is queued, then leaves the source alone for batch_ns
 * (watching only the sync bus and the control socket), then waits for the
 * source again, all within one call; its held packets could not go out before
 * the active's next report anyway, and that report ends the call.
 *
 * Before it returns it has sealed every packet it filled, so the Python path
 * starts from an empty packet. It returns what the core books
 * (adapter/core/pumping.py Pumped): the frames converted whole with their
 * counts, the first source_seq and msg_seq, the count, the digests after each
 * message, the packets sealed, their bytes and the time of the last, the held
 * items (HOLD), the message it stopped at, and the sums of the kept frames'
 * counts and bytes.
 *
 * Sockets are passed per call as libzmq handles (pyzmq's Socket.underlying)
 * of live sockets the runner owns, so a socket made afresh (a rebind) is
 * never used stale. The libzmq functions are pyzmq's own, found at import
 * (transport/_libzmq.h); adapter/source_pump.py checks the versions agree.
 *
 * Packets are built as proto/wire.py PacketBuilder.build builds them
 * (header ">2sBBHHIQHHQ": magic, version, flags 0, channel, adapter, term,
 * first msg_seq, count, 0, send time); the tests compare the pump's packets
 * with PacketBuilder's and its booking with the Python path's.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <errno.h>
#include <poll.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

#include "_libzmq.h" /* libzmq's API, taken from the libzmq pyzmq loaded (see there) */

#include "_varint.h" /* put_varint, shared with adapter/conversion's extensions */

#include "_append_api.h" /* FhAppendApi: the journal writer's C entry (adapter/journal/_native.c) */

#include "_pump_constants.h" /* HEADER_SIZE, VERSION, MAGIC_*, MAX_COUNT, STOP_*, PUMP_*, HELD_*,
                                UNBOUNDED_*: generated from proto/wire.py and adapter/core by
                                scripts/gen_constants.py */

/* ---- small helpers ------------------------------------------------------------------------- */

static int64_t clock_ns(clockid_t clock) {
    struct timespec ts;
    clock_gettime(clock, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

typedef struct {
    uint8_t *data;
    size_t len, cap;
} Bytes;

static int bytes_reserve(Bytes *b, size_t more) {
    if (b->len + more <= b->cap) return 0;
    size_t cap = b->cap ? b->cap : 16384;
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

static void put_be(uint8_t *p, uint64_t v, int size) {
    for (int i = size - 1; i >= 0; i--) {
        p[i] = (uint8_t)v;
        v >>= 8;
    }
}

static Libzmq Z;               /* pyzmq's libzmq (_libzmq.h), bound at import */
static char libzmq_path[4096]; /* where it was found */

static void *socket_of(Py_ssize_t address) { return (void *)(uintptr_t)address; }

static PyObject *zmq_failure(const char *what) {
    PyErr_Format(PyExc_OSError, "%s: %s", what, Z.strerror(Z.errno_()));
    return NULL;
}

/* Append a new reference to a list: 0, or -1 with an exception (the reference is dropped either way). */
static int append_new(PyObject *list, PyObject *item) {
    if (item == NULL) return -1;
    int failed = PyList_Append(list, item);
    Py_DECREF(item);
    return failed;
}

/* ---- the pump ------------------------------------------------------------------------------ */

typedef struct {
    PyObject_HEAD
    PyObject *run;      /* the engine's run function (ConversionEngine.run_function()) */
    PyObject *frame_of; /* None (FIX: a frame is its messages), or the engine's source_frame */
    PyObject *journal;  /* None, or the journal writer's Appender (adapter/journal/_native.c) */
    PyObject *topic;    /* bytes: the line's topic (the channel name) */
    PyObject *source_stream_obj;
    int channel, adapter, source_stream;
    Py_ssize_t max_packet; /* the packet budget, header included */
    Bytes packet;          /* the packet being filled: HEADER_SIZE bytes of room, then blocks */
    Bytes digests;         /* the call's digests, run after run */
    Bytes report;          /* the heartbeat report being built */
} PumpObject;

/* A socket the pump looks at before every frame (the sync bus, the control socket). */
typedef struct {
    void *socket; /* NULL: none */
    int fd;       /* its ZMQ_FD (-1: unknown, ZMQ_EVENTS is asked every time) */
    int quiet;    /* ZMQ_EVENTS said nothing waits, and its fd has not been readable since */
} Watched;

/* The active's heartbeat reports of one call (the module doc): what the core handed over. */
typedef struct {
    void *socket;                             /* the sync bus's PUB (NULL: the core sends them) */
    int64_t due_ns, every_ns;                 /* the next one's time (monotonic); then one interval on */
    PyObject *head, *inner_head, *inner_tail; /* bytes: the report's fixed parts (build_report) */
    unsigned long long next_source, last_source, last_msg, digest; /* the positions before the call's first message */
    Py_ssize_t sent;                                      /* reports sent */
    int64_t last_ns;                                      /* when the last went (monotonic; 0: none) */
} Report;

/* What one call of run() has done so far (its return value's fields). */
typedef struct {
    void *source, *sync, *control, *line;
    Watched watched[2]; /* sync, control */
    Watched source_w;   /* the source: quiet once a receive found nothing (EAGAIN) */
    int mode, want_payloads;
    uint64_t term, expect, stop_seq, msg_seq; /* expect: the next source_seq (0: any); msg_seq: the next */
    uint32_t count_in_packet;
    uint64_t packet_first, packet_upto; /* its first msg_seq, its last source_seq */
    PyObject *frames;                   /* list of (frame, count) */
    Py_ssize_t frame_bytes;             /* their bytes (held until the core books them) */
    Py_ssize_t frame_messages;          /* the messages converted from them */
    PyObject *held;                     /* HOLD: list of records and packets, in order; else NULL */
    PyObject *to_journal;               /* SEND: the payloads of the packet being filled, or NULL */
    uint64_t journal_msg, journal_source; /* their first msg_seq and source_seq */
    int64_t journal_ns;                   /* the time of their latest frame */
    /* SEND: the journal plan's bookkeeping (JournalPlan.take), which the core books at settle:
       the last msg_seq journaled (the plan's, then the last the pump wrote), the source_seq of
       the last it wrote, and the records it wrote and those it skipped (journaled already). */
    uint64_t journal_upto, journal_upto_source;
    Py_ssize_t journaled, journal_skipped;
    uint64_t first_source, first_msg, count;
    Py_ssize_t packets, bytes_sent;
    int64_t last_send_ns;
    PyObject *leftover;       /* list of parts, or NULL */
    PyObject *leftover_frame; /* the frame converted from it (the engine's source_frame), or NULL */
    Py_ssize_t leftover_pos, leftover_converted;
    Report report;
} Run;

static void packet_room(PumpObject *self, const Run *r, Py_ssize_t *room, Py_ssize_t *max_count) {
    if (r->mode == PUMP_MODE_CONVERT) { /* no packet to fill: the Python path's convention */
        *room = (Py_ssize_t)UNBOUNDED_ROOM;
        *max_count = UNBOUNDED_COUNT;
        return;
    }
    Py_ssize_t left = self->max_packet - (Py_ssize_t)self->packet.len;
    *room = r->count_in_packet == 0 ? -left : (left > 0 ? left : 0); /* FastPath.run's convention */
    *max_count = MAX_COUNT - (Py_ssize_t)r->count_in_packet;
}

static const FhAppendApi *append_api; /* the journal writer's C entry, got with the first journal */

/* SEND: journal the records of the packet being filled, before it can go out: the journal plan's
   bookkeeping (JournalPlan.take: a record whose msg_seq the journal has, after rule 2 numbered
   backwards, is skipped; the core books the counts at settle), then one append of the rest to the
   writer's live tail, in C (the writer's Python runs only where it has something to decide: a
   full buffer, a segment to roll, an index entry). A refusal (the append raises) drops the
   packet: its runs are booked already (numbered, in the engine's state), and the journal must
   hold what the line carried; the plan has booked them all the same, as take() before a failing
   append_batch did. 0, or -1 with an exception. */
static int journal_packet(PumpObject *self, Run *r) {
    PyObject *payloads = r->to_journal;
    if (payloads == NULL) return 0;
    r->to_journal = NULL;
    Py_ssize_t count = PyList_GET_SIZE(payloads), skip = 0;
    uint64_t first = r->journal_msg;
    if (r->journal_upto >= first) {
        uint64_t before = r->journal_upto - first; /* known records after the first: no overflow */
        skip = before >= (uint64_t)count ? count : (Py_ssize_t)before + 1;
    }
    r->journal_skipped += skip;
    int failed = 0;
    if (skip < count) {
        r->journal_upto = first + (uint64_t)count - 1;
        r->journal_upto_source = r->journal_source + (uint64_t)count - 1;
        r->journaled += count - skip;
        PyObject *fresh = skip ? PyList_GetSlice(payloads, skip, count) : Py_NewRef(payloads);
        failed = fresh == NULL ||
                 append_api->append_run(self->journal, first + (uint64_t)skip, (uint64_t)r->journal_ns,
                                        (unsigned int)self->source_stream, r->journal_source + (uint64_t)skip,
                                        fresh) < 0;
        Py_XDECREF(fresh);
    }
    Py_DECREF(payloads);
    if (failed) {
        self->packet.len = HEADER_SIZE;
        r->count_in_packet = 0;
        return -1;
    }
    return 0;
}

/* SEND: keep a run's payloads for its packet's journal call. Runs follow each other in a packet
   (consecutive msg_seq and source_seq); one that does not (no run of the pump's does) has what
   is kept journaled first. 0; -1 with an exception (no memory); -2 with an exception: the
   journal refused what was kept, and the packet is dropped. */
static int keep_for_journal(PumpObject *self, Run *r, PyObject *payloads, int64_t wall_ns,
                            unsigned long long first_seq) {
    PyObject *kept = r->to_journal;
    if (kept != NULL) {
        Py_ssize_t n = PyList_GET_SIZE(kept);
        if (r->journal_msg + (uint64_t)n == r->msg_seq && r->journal_source + (uint64_t)n == first_seq) {
            r->journal_ns = wall_ns;
            return PyList_SetSlice(kept, n, n, payloads);
        }
        if (journal_packet(self, r) < 0) return -2;
    }
    if ((r->to_journal = PyList_GetSlice(payloads, 0, PyList_GET_SIZE(payloads))) == NULL) return -1;
    r->journal_msg = r->msg_seq;
    r->journal_source = first_seq;
    r->journal_ns = wall_ns;
    return 0;
}

/* Send one line packet, [topic, packet], on a PUB or XPUB socket: 0, or -1 with an exception. */
static int send_line_packet(void *socket, PyObject *topic, const void *packet, size_t size, int flags) {
    if (Z.send(socket, PyBytes_AS_STRING(topic), (size_t)PyBytes_GET_SIZE(topic), ZMQ_SNDMORE | flags) < 0 ||
        Z.send(socket, packet, size, flags) < 0) {
        zmq_failure("sending a line packet");
        return -1;
    }
    return 0;
}

/* Seal the packet being filled: send it (SEND) or hand it to the gate (HOLD). 0, or -1 with an exception. */
static int seal_packet(PumpObject *self, Run *r) {
    if (r->count_in_packet == 0) return 0;
    uint8_t *h = self->packet.data;
    h[0] = MAGIC_0;
    h[1] = MAGIC_1;
    h[2] = VERSION;
    h[3] = 0; /* flags */
    put_be(h + 4, (uint64_t)self->channel, 2);
    put_be(h + 6, (uint64_t)self->adapter, 2);
    put_be(h + 8, r->term, 4);
    put_be(h + 12, r->packet_first, 8);
    put_be(h + 20, r->count_in_packet, 2);
    put_be(h + 22, 0, 2);
    put_be(h + 24, (uint64_t)clock_ns(CLOCK_REALTIME), 8);
    if (r->mode == PUMP_MODE_SEND) {
        if (journal_packet(self, r) < 0 ||
            send_line_packet(r->line, self->topic, self->packet.data, self->packet.len, 0) < 0)
            return -1;
    } else if (append_new(r->held, Py_BuildValue("(iy#KIK)", HELD_PACKET, (const char *)self->packet.data,
                                                 (Py_ssize_t)self->packet.len,
                                                 (unsigned long long)(r->packet_first + r->count_in_packet - 1),
                                                 (unsigned int)r->count_in_packet,
                                                 (unsigned long long)r->packet_upto)) < 0) {
        return -1;
    }
    r->packets++;
    r->bytes_sent += (Py_ssize_t)self->packet.len;
    r->last_send_ns = clock_ns(CLOCK_MONOTONIC);
    self->packet.len = HEADER_SIZE;
    r->count_in_packet = 0;
    return 0;
}

/* ---- the heartbeat report ------------------------------------------------------------------ */

enum { REPORT_FIELDS = 5 }; /* StreamState fields 2-6, the ones a report moves */

/* A heartbeat report: proto/sync.proto SyncMessage bytes with a StreamState body, serialized as
   protobuf serializes it (fields in number order, fields at zero left out). head is SyncMessage
   fields 1-4 (channel, adapter, term, role); send_time_ns is field 5; the body (field 10) is
   inner_head (StreamState field 1, source_stream), fields 2-6 from values (next_msg_seq,
   next_source_seq, last_source_seq, last_msg_seq, digest), then inner_tail (fields 7 and up:
   the session fields, purge_seq, the conflation fields). 0, or -1 with an exception. */
static int build_report(Bytes *out, PyObject *head, PyObject *inner_head, PyObject *inner_tail, int64_t send_time_ns,
                        const uint64_t values[REPORT_FIELDS]) {
    uint8_t moved[REPORT_FIELDS * 11];
    size_t n = 0;
    for (int i = 0; i < REPORT_FIELDS; i++) {
        if (values[i] == 0) continue;
        moved[n++] = (uint8_t)((2 + i) << 3); /* field 2 + i, varint */
        n = (size_t)(put_varint(moved + n, values[i]) - moved);
    }
    size_t head_len = (size_t)PyBytes_GET_SIZE(head), ih = (size_t)PyBytes_GET_SIZE(inner_head),
           it = (size_t)PyBytes_GET_SIZE(inner_tail), body = ih + n + it;
    out->len = 0;
    if (bytes_reserve(out, head_len + 1 + 10 + 1 + 10 + body) < 0) return -1;
    uint8_t *p = out->data;
    size_t len = 0;
    memcpy(p, PyBytes_AS_STRING(head), head_len);
    len += head_len;
    if (send_time_ns != 0) {
        p[len++] = (5 << 3) | 0; /* send_time_ns, varint (int64: two's complement, as protobuf writes it) */
        len = (size_t)(put_varint(p + len, (uint64_t)send_time_ns) - p);
    }
    p[len++] = (10 << 3) | 2; /* stream_state, length-delimited */
    len = (size_t)(put_varint(p + len, body) - p);
    memcpy(p + len, PyBytes_AS_STRING(inner_head), ih);
    len += ih;
    memcpy(p + len, moved, n);
    len += n;
    memcpy(p + len, PyBytes_AS_STRING(inner_tail), it);
    out->len = len + it;
    return 0;
}

/* Send the heartbeat report if its time has come (now, monotonic): the packet being filled goes
   first, so the report covers only what the line carried. 0, or -1 with an exception. */
static int report_if_due(PumpObject *self, Run *r, int64_t now) {
    Report *rep = &r->report;
    if (rep->socket == NULL || now < rep->due_ns) return 0;
    if (seal_packet(self, r) < 0) return -1;
    uint64_t values[REPORT_FIELDS] = {r->msg_seq, rep->next_source, rep->last_source, rep->last_msg, rep->digest};
    if (r->count > 0) {
        uint64_t last_source = r->first_source + r->count - 1;
        values[1] = last_source + 1;
        values[2] = last_source;
        values[3] = r->first_msg + r->count - 1;
        memcpy(&values[4], self->digests.data + self->digests.len - 8, 8); /* after the last message */
    }
    if (build_report(&self->report, rep->head, rep->inner_head, rep->inner_tail, clock_ns(CLOCK_REALTIME),
                     values) < 0)
        return -1;
    if (Z.send(rep->socket, self->report.data, self->report.len, ZMQ_DONTWAIT) < 0) {
        zmq_failure("sending a heartbeat report on the sync bus");
        return -1;
    }
    rep->sent++;
    rep->last_ns = now;
    rep->due_ns = now + rep->every_ns;
    return 0;
}

/* One run's results, as ConversionEngine.run returns them. */
typedef struct {
    Py_ssize_t pos, count;
    int stop;
    const char *blocks;
    Py_ssize_t blocks_len;
    unsigned long long first_seq;
    const char *digests;
    Py_ssize_t digests_len;
    PyObject *payloads;
} RunResult;

static int read_result(PyObject *result, RunResult *out) {
    if (!PyTuple_Check(result) || PyTuple_GET_SIZE(result) != 7) {
        PyErr_SetString(PyExc_TypeError, "a run function must return a 7-tuple");
        return -1;
    }
    PyObject *blocks = PyTuple_GET_ITEM(result, 3), *digests = PyTuple_GET_ITEM(result, 5);
    if (!PyBytes_Check(blocks) || !PyBytes_Check(digests)) {
        PyErr_SetString(PyExc_TypeError, "a run's blocks and digests must be bytes");
        return -1;
    }
    out->pos = PyLong_AsSsize_t(PyTuple_GET_ITEM(result, 0));
    out->count = PyLong_AsSsize_t(PyTuple_GET_ITEM(result, 1));
    out->stop = (int)PyLong_AsLong(PyTuple_GET_ITEM(result, 2));
    out->first_seq = PyLong_AsUnsignedLongLong(PyTuple_GET_ITEM(result, 4));
    if (PyErr_Occurred()) return -1;
    out->blocks = PyBytes_AS_STRING(blocks);
    out->blocks_len = PyBytes_GET_SIZE(blocks);
    out->digests = PyBytes_AS_STRING(digests);
    out->digests_len = PyBytes_GET_SIZE(digests);
    out->payloads = PyTuple_GET_ITEM(result, 6);
    if (out->count < 0 || out->digests_len != out->count * 8 || out->pos < 0) {
        PyErr_SetString(PyExc_ValueError, "a run returned an inconsistent result");
        return -1;
    }
    return 0;
}

/* HOLD: a run's journal records, for the gate. Runs that follow each other with no packet sealed
   in between go in one item (one JournalRecords for the lot, as a frame of many runs would be);
   a packet sealed in between starts a new one, so each packet still follows its records and
   nothing it carries waits behind records of later messages at the gate. The item's time is
   that of its latest frame (wall_ns, read as the frame came): one JournalRecords has one time,
   and stamped with an earlier frame's, a message that came later would leave the delayed line
   before it is due. */
static int hold_records(Run *r, PyObject *payloads, int64_t wall_ns, unsigned long long first_seq) {
    Py_ssize_t n = PyList_GET_SIZE(r->held);
    if (n > 0) {
        PyObject *last = PyList_GET_ITEM(r->held, n - 1); /* (HELD_RECORDS, msg_seq, time, source_seq, payloads) */
        if (PyLong_AsLong(PyTuple_GET_ITEM(last, 0)) == HELD_RECORDS) {
            PyObject *held = PyTuple_GET_ITEM(last, 4);
            unsigned long long last_msg = PyLong_AsUnsignedLongLong(PyTuple_GET_ITEM(last, 1));
            unsigned long long last_source = PyLong_AsUnsignedLongLong(PyTuple_GET_ITEM(last, 3));
            Py_ssize_t held_n = PyList_GET_SIZE(held);
            if (PyErr_Occurred()) return -1;
            if (last_msg + (unsigned long long)held_n == r->msg_seq &&
                last_source + (unsigned long long)held_n == first_seq) {
                if (PyList_SetSlice(held, held_n, held_n, payloads) < 0) return -1;
                PyObject *restamped = Py_BuildValue("(iKLKO)", HELD_RECORDS, last_msg, (long long)wall_ns,
                                                    last_source, held);
                return restamped == NULL ? -1 : PyList_SetItem(r->held, n - 1, restamped);
            }
        }
    }
    PyObject *copy = PyList_GetSlice(payloads, 0, PyList_GET_SIZE(payloads)); /* ours to extend */
    if (copy == NULL) return -1;
    int failed = append_new(r->held, Py_BuildValue("(iKLKN)", HELD_RECORDS, (unsigned long long)r->msg_seq,
                                                    (long long)wall_ns, first_seq, copy));
    return failed;
}

/* Book one run: its journal records (kept for its packet's journal call: SEND; held for the gate:
   HOLD), its blocks, its digests. 0 booked; -1 with an exception and nothing booked (a result it
   cannot take, no memory); -2 with an exception and the run booked but not in the packet: the
   journal refused the records kept before it (SEND), and the packet went with them. The engine
   has applied the run to its state by now, so it is still numbered, as the Python path numbers
   what its journal fails to write: the active's line skips those numbers (the backups' lines
   carry them) and the journal holds nothing the line did not carry. The caller stops there. */
static int take_run(PumpObject *self, Run *r, const RunResult *res, int64_t wall_ns) {
    if (res->count == 0) return 0;
    int in_packet = r->mode != PUMP_MODE_CONVERT, refused = 0;
    if (bytes_reserve(&self->digests, (size_t)res->digests_len) < 0 ||
        (in_packet && bytes_reserve(&self->packet, (size_t)res->blocks_len) < 0))
        return -1;
    if (r->want_payloads) {
        PyObject *payloads = res->payloads;
        if (!PyList_Check(payloads) || PyList_GET_SIZE(payloads) != res->count) {
            PyErr_SetString(PyExc_TypeError, "a run asked for payloads must return one per message");
            return -1;
        }
        if (r->mode == PUMP_MODE_SEND) {
            int kept = keep_for_journal(self, r, payloads, wall_ns, res->first_seq);
            if (kept == -1) return -1;
            if (kept == -2) { /* booked below, kept off the line */
                refused = 1;
                in_packet = 0;
            }
        } else if (hold_records(r, payloads, wall_ns, res->first_seq) < 0) {
            return -1;
        }
    }
    if (in_packet) {
        memcpy(self->packet.data + self->packet.len, res->blocks, (size_t)res->blocks_len);
        self->packet.len += (size_t)res->blocks_len;
        if (r->count_in_packet == 0) r->packet_first = r->msg_seq;
        r->count_in_packet += (uint32_t)res->count;
        r->packet_upto = res->first_seq + (uint64_t)res->count - 1;
    }
    memcpy(self->digests.data + self->digests.len, res->digests, (size_t)res->digests_len);
    self->digests.len += (size_t)res->digests_len;
    if (r->count == 0) {
        r->first_source = res->first_seq;
        r->first_msg = r->msg_seq;
    }
    r->count += (uint64_t)res->count;
    r->msg_seq += (uint64_t)res->count;
    r->expect = res->first_seq + (uint64_t)res->count;
    return refused ? -2 : 0;
}

/* Keep a frame the pump converted messages of (for the core's ring): 0, or -1 with an exception. */
static int keep_frame(Run *r, PyObject *frame, Py_ssize_t converted) {
    if (converted == 0) return 0;
    if (append_new(r->frames, Py_BuildValue("(On)", frame, converted)) < 0) return -1;
    r->frame_bytes += PyBytes_GET_SIZE(frame);
    r->frame_messages += converted;
    return 0;
}

/* Hand a source message back to the Python path: its parts, the frame the pump converted from
   (NULL: none), where to go on in it and how many of its messages were converted. */
static int hand_back(Run *r, PyObject *parts, PyObject *frame, Py_ssize_t pos, Py_ssize_t converted) {
    r->leftover = Py_NewRef(parts);
    r->leftover_frame = Py_XNewRef(frame);
    r->leftover_pos = pos;
    r->leftover_converted = converted;
    return 2;
}

/* Receive every part of one source message: a new list, NULL with no exception when none
   waits, NULL with an exception on an error. */
static PyObject *receive(void *source) {
    zmq_msg_t part;
    PyObject *parts = NULL;
    for (;;) {
        Z.msg_init(&part);
        if (Z.msg_recv(&part, source, parts == NULL ? ZMQ_DONTWAIT : 0) < 0) {
            int error = Z.errno_();
            Z.msg_close(&part);
            if (parts == NULL && error == EAGAIN) return NULL;
            Py_XDECREF(parts);
            return zmq_failure("receiving a source message");
        }
        PyObject *data = PyBytes_FromStringAndSize(Z.msg_data(&part), (Py_ssize_t)Z.msg_size(&part));
        int more = Z.msg_more(&part);
        Z.msg_close(&part);
        if (data == NULL || (parts == NULL && (parts = PyList_New(0)) == NULL)) {
            Py_XDECREF(data);
            Py_XDECREF(parts);
            return NULL;
        }
        if (append_new(parts, data) < 0) {
            Py_DECREF(parts);
            return NULL;
        }
        if (!more) return parts;
    }
}

/* One call of the engine's run function over frame from pos (the Python path's arguments). */
static PyObject *call_run(PumpObject *self, Run *r, PyObject *frame, Py_ssize_t pos, int64_t wall_ns) {
    Py_ssize_t room, max_count;
    packet_room(self, r, &room, &max_count);
    PyObject *args[10] = {frame,
                          PyLong_FromSsize_t(pos),
                          PyLong_FromUnsignedLongLong(r->expect),
                          PyLong_FromUnsignedLongLong(r->stop_seq),
                          PyLong_FromSsize_t(room),
                          PyLong_FromSsize_t(max_count),
                          PyLong_FromLongLong(wall_ns),
                          self->source_stream_obj,
                          Py_True, /* publish: encoded by every adapter alike (what is too big is skipped alike) */
                          r->want_payloads ? Py_True : Py_False};
    PyObject *result = NULL;
    if (args[1] && args[2] && args[3] && args[4] && args[5] && args[6])
        result = PyObject_Vectorcall(self->run, args, 10, NULL);
    for (int i = 1; i <= 6; i++) Py_XDECREF(args[i]);
    return result;
}

/* One source message: 0 none waited, 1 converted whole, 2 handed back, -1 error (what of the
   frame was converted is booked, and the rest handed back, first). */
static int take_message(PumpObject *self, Run *r) {
    PyObject *parts = receive(r->source), *frame = NULL;
    if (parts == NULL) {
        if (PyErr_Occurred()) return -1;
        r->source_w.quiet = r->source_w.fd >= 0; /* it processed its commands and found nothing */
        return 0;
    }
    r->source_w.quiet = 0;
    int outcome = -1;
    if (PyList_GET_SIZE(parts) != 2) { /* the Python path quarantines it (malformed_frame) */
        outcome = hand_back(r, parts, NULL, 0, 0);
        goto done;
    }
    if (self->frame_of == Py_None) {
        frame = Py_NewRef(PyList_GET_ITEM(parts, 1));
    } else if ((frame = PyObject_CallOneArg(self->frame_of, PyList_GET_ITEM(parts, 1))) == NULL ||
               !PyBytes_Check(frame)) {
        PyErr_Clear(); /* the Python path cuts the frame again and books what goes wrong */
        Py_CLEAR(frame);
        outcome = hand_back(r, parts, NULL, 0, 0);
        goto done;
    }
    int64_t wall_ns = clock_ns(CLOCK_REALTIME);
    Py_ssize_t pos = 0, converted = 0, frame_len = PyBytes_GET_SIZE(frame);
    int failed = 0; /* a run was booked, then something failed: the exception is set */
    for (;;) {
        PyObject *result = call_run(self, r, frame, pos, wall_ns);
        if (result == NULL) {
            /* The run raised: the Python path calls it again from here and books the fault
               (Pipeline.convert quarantines the frame), as it would have without the pump. */
            PyErr_Clear();
            outcome = hand_back(r, parts, frame, pos, converted);
            goto done;
        }
        RunResult res;
        if (read_result(result, &res) < 0) { /* a broken run function: nothing to go on from */
            Py_DECREF(result);
            goto done;
        }
        int taken = take_run(self, r, &res, wall_ns);
        Py_DECREF(result);
        if (taken == -1) goto done;
        converted += res.count;
        pos = res.pos;
        if (taken < 0) {
            failed = 1;
            break;
        }
        if (res.stop == STOP_END && pos >= frame_len) break;
        if (res.stop == STOP_ROOM || res.stop == STOP_COUNT) {
            if (seal_packet(self, r) < 0) {
                failed = 1;
                break;
            }
            continue;
        }
        outcome = hand_back(r, parts, frame, pos, converted); /* STOP_SLOW: the careful path */
        goto done;
    }
    if (failed) {
        /* What was converted is booked; the rest of the frame goes on in the Python path (the
           error is raised once the core has booked both), so no message is converted twice
           and none is skipped. */
        PyObject *type, *value, *traceback;
        PyErr_Fetch(&type, &value, &traceback);
        if (pos < frame_len)
            hand_back(r, parts, frame, pos, converted);
        else if (keep_frame(r, frame, converted) < 0)
            PyErr_Clear(); /* no memory for the ring's entry: the error that stopped the run goes back */
        PyErr_Restore(type, value, traceback);
        goto done;
    }
    if (keep_frame(r, frame, converted) < 0) goto done;
    outcome = 1;
done:
    Py_XDECREF(frame);
    Py_DECREF(parts);
    return outcome;
}

static void watch(Watched *w, void *socket) {
    size_t size = sizeof w->fd;
    w->socket = socket;
    w->quiet = 0;
    if (socket == NULL || Z.getsockopt(socket, ZMQ_FD, &w->fd, &size) != 0) w->fd = -1;
}

/* Whether every socket a wait looks at is quiet, so that a poll() of their fds is the wait. */
static int all_quiet(Run *r, int with_source) {
    if (with_source && !r->source_w.quiet) return 0;
    for (int i = 0; i < 2; i++)
        if (r->watched[i].socket != NULL && !r->watched[i].quiet) return 0;
    return 1;
}

/* One poll() of the quiet sockets' fds (the source's too with with_source), the GIL released when
   it may sleep (timeout_ms > 0; 0 looks and returns). A socket whose fd became readable is quiet no
   more (a command came: it is asked what it has), and after a failure none is. 1: one did; 0: the
   timeout passed; -1: poll() failed (*error: its errno). */
static int poll_quiet(Run *r, int with_source, long timeout_ms, int *error) {
    struct pollfd fds[3];
    Watched *of[3];
    int n = 0, rc;
    if (with_source) {
        of[n] = &r->source_w;
        fds[n++] = (struct pollfd){.fd = r->source_w.fd, .events = POLLIN};
    }
    for (int i = 0; i < 2; i++) {
        if (r->watched[i].socket == NULL) continue;
        of[n] = &r->watched[i];
        fds[n++] = (struct pollfd){.fd = r->watched[i].fd, .events = POLLIN};
    }
    if (timeout_ms > 0) {
        Py_BEGIN_ALLOW_THREADS
        rc = poll(fds, (nfds_t)n, (int)timeout_ms);
        if (rc < 0) *error = errno;
        Py_END_ALLOW_THREADS
    } else if ((rc = poll(fds, (nfds_t)n, 0)) < 0) {
        *error = errno;
    }
    for (int k = 0; k < n; k++)
        if (rc < 0 || fds[k].revents != 0) of[k]->quiet = 0;
    return rc < 0 ? -1 : rc > 0;
}

/* Whether the sync bus or the control socket has a message waiting.
 *
 * libzmq answers ZMQ_EVENTS by processing the socket's pending commands, which costs a
 * getpid() and a poll() in the kernel every time: before every frame, on both sockets, that
 * was a tenth of a backup's time at 10k msg/s. Once ZMQ_EVENTS said a socket has nothing,
 * nothing can reach it but through a command (a pipe activated or attached), and a command
 * makes the socket's ZMQ_FD readable until the socket processes it (libzmq's edge-triggered
 * ZMQ_FD, as event loops use it). So while both sockets are quiet one poll() of both fds
 * answers; only a socket whose fd is readable (or unknown) is asked ZMQ_EVENTS again. Nothing
 * else reads these sockets during a call: the runner, which does, waits for it to return (the
 * journal writer's slow path and signal handlers touch neither socket), and the zmq_poll of
 * wait_on that also processes their commands reports what it finds. */
static int group_speaks(Run *r) {
    int error = 0;
    if (all_quiet(r, 0) && poll_quiet(r, 0, 0, &error) == 0) return 0; /* no command came: still nothing */
    for (int i = 0; i < 2; i++) {
        Watched *w = &r->watched[i];
        if (w->socket == NULL || w->quiet) continue;
        int events = 0;
        size_t size = sizeof events;
        if (Z.getsockopt(w->socket, ZMQ_EVENTS, &events, &size) != 0) continue; /* asked again next time */
        if (events & ZMQ_POLLIN) return 1;
        w->quiet = w->fd >= 0;
    }
    return 0;
}

/* Wait on the adapter's sockets until until_ns (at most deadline_ns): the source too, or (a
   backup's rest between two batches) only the sync bus and the control socket. 1: the source is
   readable (or a command came to it: the drain that follows finds out which), or the rest is over;
   0: stop (*stop set: the group spoke, the deadline came, nothing more came for a run not to wait,
   a signal); -1: error.

   zmq_poll asks every socket ZMQ_EVENTS before and after it sleeps, and each answer costs a
   getpid() and a poll() (group_speaks says why): an active at 10k msg/s made 18 poll()s and 8
   getpid()s for each read of a mailbox's eventfd, about one a wake-up. A socket that said it has
   nothing is quiet until its edge-triggered fd is readable (the source: its receive found
   nothing), so while every socket waited on is quiet, one poll() of their fds is the whole wait;
   a socket whose fd wakes it is asked again (the watched ones here, the source by the drain's
   receive). */
static int wait_on(Run *r, int with_source, int64_t until_ns, int64_t deadline_ns, int *stop) {
    for (;;) {
        int64_t now = clock_ns(CLOCK_MONOTONIC);
        if (now >= until_ns) {
            if (now < deadline_ns && !with_source) return 1; /* rested: read the source again */
            *stop = now >= deadline_ns ? PUMP_DEADLINE : PUMP_DRAINED;
            return 0;
        }
        long timeout_ms = (long)((until_ns - now + 999999) / 1000000); /* rounded up, as the runner */
        int error = 0;
        if (all_quiet(r, with_source)) {
            int woke = poll_quiet(r, with_source, timeout_ms, &error);
            if (woke < 0 && error == EINTR) {
                if (PyErr_CheckSignals() < 0) return -1;
                *stop = PUMP_SIGNAL;
                return 0;
            }
            if (woke <= 0) continue; /* the time is looked at again (or, poll() failed, zmq_poll asks) */
            if (with_source && !r->source_w.quiet) return 1; /* the drain asks the group first */
            if (group_speaks(r)) {
                *stop = PUMP_SOCKET;
                return 0;
            }
            continue;
        }
        zmq_pollitem_t items[3] = {
            {r->source, 0, ZMQ_POLLIN, 0}, {r->sync, 0, ZMQ_POLLIN, 0}, {r->control, 0, ZMQ_POLLIN, 0}};
        int first = with_source ? 0 : 1, n = (r->control != NULL ? 3 : 2) - first, rc;
        Py_BEGIN_ALLOW_THREADS
        rc = Z.poll(items + first, n, timeout_ms);
        if (rc < 0) error = Z.errno_();
        Py_END_ALLOW_THREADS
        if (rc < 0) {
            if (error != EINTR) {
                zmq_failure(with_source ? "waiting for the source" : "waiting between source batches");
                return -1;
            }
            if (PyErr_CheckSignals() < 0) return -1;
            *stop = PUMP_SIGNAL;
            return 0;
        }
        if ((items[1].revents & ZMQ_POLLIN) || (r->control != NULL && (items[2].revents & ZMQ_POLLIN))) {
            *stop = PUMP_SOCKET;
            return 0;
        }
        if (with_source && (items[0].revents & ZMQ_POLLIN)) return 1;
    }
}

/* The pump's loop: 0 with *stop set, or -1 with an exception (what was done is in r either way).
   It drains what is queued, seals the packet once nothing more waits, then waits for more until
   wait_ns (at most the deadline), batch_ns after each drain at the earliest (0: at once). The sync
   bus and the control socket are looked at before every frame and the deadline after every frame:
   the group's word comes first, and a source that never pauses does not keep the timers waiting. */
static int pump(PumpObject *self, Run *r, int64_t deadline_ns, int64_t wait_ns, int64_t batch_ns,
                Py_ssize_t max_frames, Py_ssize_t max_bytes, int *stop) {
    Py_ssize_t frames = 0;
    for (;;) {
        for (;;) { /* drain what is queued */
            if (group_speaks(r)) {
                *stop = PUMP_SOCKET;
                return seal_packet(self, r);
            }
            int taken = take_message(self, r);
            if (taken < 0) return -1;
            if (taken == 0) break;
            if (taken == 2) {
                *stop = PUMP_FRAME;
                return seal_packet(self, r);
            }
            if (++frames >= max_frames || r->frame_bytes >= max_bytes) {
                *stop = PUMP_BUDGET;
                return seal_packet(self, r);
            }
            int64_t now = clock_ns(CLOCK_MONOTONIC);
            if (report_if_due(self, r, now) < 0) return -1;
            if (now >= deadline_ns) {
                *stop = PUMP_DEADLINE;
                return seal_packet(self, r);
            }
        }
        if (seal_packet(self, r) < 0 || report_if_due(self, r, clock_ns(CLOCK_MONOTONIC)) < 0) return -1;
        if (batch_ns > 0) {
            int64_t until = clock_ns(CLOCK_MONOTONIC) + batch_ns;
            int rested = wait_on(r, 0, until < deadline_ns ? until : deadline_ns, deadline_ns, stop);
            if (rested <= 0) return rested;
        }
        int64_t until = wait_ns < deadline_ns ? wait_ns : deadline_ns;
        int to_report = r->report.socket != NULL && r->report.due_ns < until;
        int ready = wait_on(r, 1, to_report ? r->report.due_ns : until, deadline_ns, stop);
        if (ready == 0 && to_report && *stop == PUMP_DRAINED) continue; /* the report's time: sent above */
        if (ready <= 0) return ready;
    }
}

PyDoc_STRVAR(Pump_run_doc,
             "run(source, sync, control, line, deadline_ns, wait_ns, expect_seq, stop_seq, next_msg_seq, term,\n"
             "    mode, journal, max_frames, max_bytes, batch_ns=0, report=None, journal_upto=0)\n"
             "--\n\n"
             "Pump source messages until something needs the core (see the module doc).\n"
             "Sockets are libzmq handles (pyzmq's Socket.underlying; control 0 when there is none, line 0\n"
             "unless mode is PUMP_MODE_SEND); deadline_ns (the core's timers) and wait_ns (how long to wait\n"
             "for more once drained: 0 not at all) are on the monotonic clock; batch_ns > 0 leaves the\n"
             "source alone that long after each drain; stop_seq 0 watches no position. report (PUMP_MODE_SEND\n"
             "only) is the active's heartbeat report for the pump to send: (sync bus PUB, due_ns, every_ns,\n"
             "head, inner_head, inner_tail, next_source_seq, last_source_seq, last_msg_seq, digest), see\n"
             "encode_report. journal_upto is the last msg_seq the journal holds (the journal plan's): the\n"
             "pump journals none up to it. Returns adapter.core.pumping.Pumped's fields.");

static PyObject *Pump_run(PumpObject *self, PyObject *args) {
    Py_ssize_t source, sync, control, line, max_frames, max_bytes;
    long long deadline_ns, wait_ns, batch_ns = 0;
    unsigned long long expect, stop_seq, msg_seq, term;
    int mode, journal;
    PyObject *report = Py_None;
    unsigned long long journal_upto = 0;
    if (!PyArg_ParseTuple(args, "nnnnLLKKKKipnn|LOK:run", &source, &sync, &control, &line, &deadline_ns, &wait_ns,
                          &expect, &stop_seq, &msg_seq, &term, &mode, &journal, &max_frames, &max_bytes,
                          &batch_ns, &report, &journal_upto))
        return NULL;
    if (mode != PUMP_MODE_SEND && mode != PUMP_MODE_HOLD && mode != PUMP_MODE_CONVERT) {
        PyErr_Format(PyExc_ValueError, "mode must be a PUMP_MODE_*, got %d", mode);
        return NULL;
    }
    if (source == 0 || sync == 0 || (line == 0 && mode == PUMP_MODE_SEND) || max_frames < 1 || max_bytes < 1 ||
        term > 0xFFFFFFFFULL) {
        PyErr_SetString(PyExc_ValueError, "a socket is missing, max_frames or max_bytes < 1, or term out of range");
        return NULL;
    }
    if (journal && mode == PUMP_MODE_SEND && self->journal == Py_None) {
        PyErr_SetString(PyExc_ValueError, "journal asked for but the pump has no journal");
        return NULL;
    }
    Run r = {.source = socket_of(source),
             .sync = socket_of(sync),
             .control = control ? socket_of(control) : NULL,
             .line = socket_of(line),
             .mode = mode,
             .want_payloads = journal && mode != PUMP_MODE_CONVERT,
             .term = term,
             .expect = expect,
             .stop_seq = stop_seq,
             .msg_seq = msg_seq,
             .journal_upto = journal_upto};
    if (report != Py_None) {
        Report *rep = &r.report;
        Py_ssize_t socket;
        long long due, every;
        if (mode != PUMP_MODE_SEND) {
            PyErr_SetString(PyExc_ValueError, "only an active sending its packets (PUMP_MODE_SEND) reports");
            return NULL;
        }
        if (!PyTuple_Check(report) ||
            !PyArg_ParseTuple(report, "nLLSSSKKKK:report", &socket, &due, &every, &rep->head, &rep->inner_head,
                              &rep->inner_tail, &rep->next_source, &rep->last_source, &rep->last_msg, &rep->digest)) {
            if (!PyErr_Occurred()) PyErr_SetString(PyExc_TypeError, "report must be a tuple or None");
            return NULL;
        }
        if (socket == 0 || every <= 0) {
            PyErr_SetString(PyExc_ValueError, "a report needs the sync bus's socket and an interval > 0");
            return NULL;
        }
        rep->socket = socket_of(socket);
        rep->due_ns = due;
        rep->every_ns = every;
    }
    watch(&r.watched[0], r.sync);
    watch(&r.watched[1], r.control);
    watch(&r.source_w, r.source);
    if ((r.frames = PyList_New(0)) == NULL) return NULL;
    if (mode == PUMP_MODE_HOLD && (r.held = PyList_New(0)) == NULL) {
        Py_DECREF(r.frames);
        return NULL;
    }
    self->packet.len = HEADER_SIZE;
    self->digests.len = 0;
    int stop = PUMP_DEADLINE;
    PyObject *error = NULL;
    if (pump(self, &r, (int64_t)deadline_ns, (int64_t)wait_ns, (int64_t)batch_ns, max_frames, max_bytes, &stop) < 0) {
        /* What was numbered must still be booked, or the core would number it again: the
           error goes back with it (PUMP_ERROR), and the runner raises it once the core booked it. */
        PyObject *type, *traceback;
        PyErr_Fetch(&type, &error, &traceback);
        PyErr_NormalizeException(&type, &error, &traceback);
        if (error != NULL && traceback != NULL) PyException_SetTraceback(error, traceback);
        Py_XDECREF(type);
        Py_XDECREF(traceback);
        stop = PUMP_ERROR;
        if (seal_packet(self, &r) < 0) PyErr_Clear(); /* blocks booked but not sealed: out with them */
    }
    PyObject *result = Py_BuildValue(
        "(iOKKKy#nnLOOOnnOnnnLnnKK)", stop, r.frames, r.first_source, r.first_msg, r.count,
        (const char *)self->digests.data, (Py_ssize_t)self->digests.len, r.packets, r.bytes_sent,
        (long long)r.last_send_ns, r.held ? r.held : Py_None, r.leftover ? r.leftover : Py_None,
        r.leftover_frame ? r.leftover_frame : Py_None, r.leftover_pos, r.leftover_converted, error ? error : Py_None,
        r.frame_messages, r.frame_bytes, r.report.sent, (long long)r.report.last_ns, r.journaled, r.journal_skipped,
        (unsigned long long)(r.journaled ? r.journal_upto : 0), (unsigned long long)r.journal_upto_source);
    Py_XDECREF(error);
    Py_DECREF(r.frames);
    Py_XDECREF(r.held);
    Py_XDECREF(r.to_journal); /* NULL here: every seal journals its packet's (a safeguard) */
    Py_XDECREF(r.leftover);
    Py_XDECREF(r.leftover_frame);
    return result;
}

static PyObject *Pump_new(PyTypeObject *type, PyObject *args, PyObject *kwds) {
    static char *kwlist[] = {"run",     "frame_of",      "journal",          "topic", "channel",
                             "adapter", "source_stream", "max_packet_bytes", NULL};
    PyObject *run, *frame_of, *journal, *topic;
    int channel, adapter, source_stream;
    Py_ssize_t max_packet;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "OOOSiiin:Pump", kwlist, &run, &frame_of, &journal, &topic,
                                     &channel, &adapter, &source_stream, &max_packet))
        return NULL;
    if (!PyCallable_Check(run) || (frame_of != Py_None && !PyCallable_Check(frame_of))) {
        PyErr_SetString(PyExc_TypeError, "run must be callable, frame_of callable or None");
        return NULL;
    }
    if (journal != Py_None) { /* the journal writer's Appender, appended to through its C entry */
        if (append_api == NULL) {
            const FhAppendApi *api = PyCapsule_Import(FH_APPEND_CAPSULE, 0);
            if (api == NULL) return NULL;
            if (api->version != FH_APPEND_API_VERSION) {
                PyErr_Format(PyExc_ImportError, "%s is version %d, the pump was built for %d", FH_APPEND_CAPSULE,
                             api->version, FH_APPEND_API_VERSION);
                return NULL;
            }
            append_api = api;
        }
        if (!PyObject_TypeCheck(journal, append_api->appender_type)) {
            PyErr_Format(PyExc_TypeError, "journal must be None or a journal writer's Appender, not %.100s",
                         Py_TYPE(journal)->tp_name);
            return NULL;
        }
    }
    if (channel < 0 || channel > 0xFFFF || adapter < 0 || adapter > 0xFFFF || source_stream < 0 ||
        source_stream > 0xFFFF || max_packet <= HEADER_SIZE) {
        PyErr_SetString(PyExc_ValueError, "channel, adapter or source_stream out of range, or no room for blocks");
        return NULL;
    }
    PumpObject *self = (PumpObject *)type->tp_alloc(type, 0);
    if (self == NULL) return NULL;
    self->run = Py_NewRef(run);
    self->frame_of = Py_NewRef(frame_of);
    self->journal = Py_NewRef(journal);
    self->topic = Py_NewRef(topic);
    self->channel = channel;
    self->adapter = adapter;
    self->source_stream = source_stream;
    self->max_packet = max_packet;
    if ((self->source_stream_obj = PyLong_FromLong(source_stream)) == NULL ||
        bytes_reserve(&self->packet, (size_t)max_packet + 4096) < 0) {
        Py_DECREF(self);
        return NULL;
    }
    self->packet.len = HEADER_SIZE;
    return (PyObject *)self;
}

static void Pump_dealloc(PumpObject *self) {
    Py_XDECREF(self->run);
    Py_XDECREF(self->frame_of);
    Py_XDECREF(self->journal);
    Py_XDECREF(self->topic);
    Py_XDECREF(self->source_stream_obj);
    PyMem_Free(self->packet.data);
    PyMem_Free(self->digests.data);
    PyMem_Free(self->report.data);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyMethodDef Pump_methods[] = {
    {"run", (PyCFunction)Pump_run, METH_VARARGS, Pump_run_doc},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject PumpType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "feedha.adapter._pump.Pump",
    .tp_basicsize = sizeof(PumpObject),
    .tp_dealloc = (destructor)Pump_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Pump(run, frame_of, journal, topic, channel, adapter, source_stream, max_packet_bytes): the "
              "source pump (see the module doc); journal is None or a journal writer's Appender.",
    .tp_new = Pump_new,
    .tp_methods = Pump_methods,
};

static PyObject *zmq_version_of(PyObject *Py_UNUSED(module), PyObject *Py_UNUSED(args)) {
    int major, minor, patch;
    Z.version(&major, &minor, &patch);
    return Py_BuildValue("(iii)", major, minor, patch);
}

/* send_packet(socket, topic, packet): one line packet, [topic, packet], sent as the pump sends its
   own: holding the GIL. pyzmq lets the GIL go and takes it back around each of its sends (and
   checks its arguments in Python); a send on a PUB or XPUB socket never waits (a peer at its
   high-water mark loses the message), so nothing is gained by letting go. Measured on a publishing
   backup at 100k msg/s: 10-18 -> 7-11 us of thread CPU a packet (docs/performance.md). */
static PyObject *send_packet(PyObject *Py_UNUSED(module), PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 3 || !PyLong_Check(args[0]) || !PyBytes_Check(args[1]) || !PyBytes_Check(args[2])) {
        PyErr_SetString(PyExc_TypeError, "send_packet(socket: int, topic: bytes, packet: bytes)");
        return NULL;
    }
    void *socket = PyLong_AsVoidPtr(args[0]);
    if (socket == NULL) {
        if (!PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "send_packet: no socket (address 0)");
        return NULL;
    }
    if (send_line_packet(socket, args[1], PyBytes_AS_STRING(args[2]), (size_t)PyBytes_GET_SIZE(args[2]), ZMQ_DONTWAIT) <
        0)
        return NULL;
    Py_RETURN_NONE;
}

/* encode_report(head, inner_head, inner_tail, send_time_ns, next_msg_seq, next_source_seq, last_source_seq,
   last_msg_seq, digest): the heartbeat report the pump sends (build_report), for the tests to hold
   against protobuf's own serialization. */
static PyObject *encode_report(PyObject *Py_UNUSED(module), PyObject *args) {
    PyObject *head, *inner_head, *inner_tail;
    long long send_time_ns;
    unsigned long long k[REPORT_FIELDS];
    if (!PyArg_ParseTuple(args, "SSSLKKKKK:encode_report", &head, &inner_head, &inner_tail, &send_time_ns, &k[0],
                          &k[1], &k[2], &k[3], &k[4]))
        return NULL;
    uint64_t v[REPORT_FIELDS];
    for (int i = 0; i < REPORT_FIELDS; i++) v[i] = k[i];
    Bytes out = {0};
    if (build_report(&out, head, inner_head, inner_tail, (int64_t)send_time_ns, v) < 0) {
        PyMem_Free(out.data);
        return NULL;
    }
    PyObject *bytes = PyBytes_FromStringAndSize((const char *)out.data, (Py_ssize_t)out.len);
    PyMem_Free(out.data);
    return bytes;
}

static PyMethodDef module_methods[] = {
    {"encode_report", encode_report, METH_VARARGS,
     "encode_report(head, inner_head, inner_tail, send_time_ns, next_msg_seq, next_source_seq, last_source_seq, "
     "last_msg_seq, digest): the heartbeat report the pump sends, as SyncMessage bytes (see adapter/_pump.c)."},
    {"zmq_version_info", zmq_version_of, METH_NOARGS, "The version of the libzmq this extension is bound to."},
    {"send_packet", (PyCFunction)(void (*)(void))send_packet, METH_FASTCALL,
     "send_packet(socket, topic, packet): send [topic, packet] on the libzmq socket at address socket "
     "(pyzmq's Socket.underlying, a PUB or XPUB) without letting the GIL go; OSError on a libzmq error."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    .m_base = PyModuleDef_HEAD_INIT,
    .m_name = "feedha.adapter._pump",
    .m_doc = "The source pump: an adapter's common turn in C (see adapter/_pump.c).",
    .m_size = -1,
    .m_methods = module_methods,
};

PyMODINIT_FUNC PyInit__pump(void) {
    char why[8400];
    PyObject *zmq = PyImport_ImportModule("zmq"); /* pyzmq loads its libzmq: the one to bind to */
    if (zmq == NULL) return NULL;
    Py_DECREF(zmq);
    if (libzmq_bind(&Z, libzmq_path, sizeof libzmq_path, why, sizeof why) < 0) {
        PyErr_Format(PyExc_ImportError, "feedha.adapter._pump: %s", why);
        return NULL;
    }
    if (PyType_Ready(&PumpType) < 0) return NULL;
    PyObject *m = PyModule_Create(&module);
    if (m == NULL) return NULL;
    if (fh_add_constants(m) < 0 || PyModule_AddObjectRef(m, "Pump", (PyObject *)&PumpType) < 0 ||
        PyModule_AddStringConstant(m, "libzmq_path", libzmq_path) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
