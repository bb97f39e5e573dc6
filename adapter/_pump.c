/*
 * feedha.adapter._pump: the active adapter's source -> line path in C.
 *
 * Theory of operation
 * -------------------
 * In the Python loop (adapter/runner.py) an active adapter's common turn is
 * a poll, a receive, the core's stages and a send: ~30 us of interpreter a
 * source frame at one frame a turn, ten times what a bare relay spends. The
 * pump is that turn in C. Pump.run waits on the adapter's sockets with
 * zmq_poll (the GIL released), receives each source message, hands its frame
 * to the conversion engine's run function (the same C run the Python path
 * calls: adapter/conversion/engine.py ConversionEngine.run), appends the
 * blocks to a packet and sends the packet on the line as soon as the source
 * has nothing more to read (or the packet is full), then waits again.
 *
 * The pump decides nothing. The core (adapter/core/pumping.py) says when it
 * may run -- the active in the plain state, within a deadline -- and the pump
 * comes back at the first thing that needs a decision:
 *
 *   PUMP_DEADLINE  the core's next deadline came (timers);
 *   PUMP_SOCKET    the sync bus or the control socket is readable;
 *   PUMP_FRAME     a source message it does not take whole: not two parts,
 *                  a run that stopped at a message (the careful path), or a
 *                  run function that raised (the Python path raises it again
 *                  and quarantines the frame); it is handed back with the
 *                  position the Python path goes on from;
 *   PUMP_BUDGET    max_frames frames, or frames of max_bytes, came in one call
 *                  (bounds: the deadline ends a call under load as well, and
 *                  what it converted is held until the core books it);
 *   PUMP_SIGNAL    a signal interrupted the wait (its Python handler ran).
 *
 * Before it returns it has sent every packet it filled, so the Python path
 * starts from an empty packet. It returns what the core books
 * (adapter/core/pumping.py Pumped): the frames converted whole with their
 * counts, the first source_seq and msg_seq, the count, the digests after
 * each message, the packets and bytes sent and the time of the last send.
 * With a journal it calls journal(first_msg_seq, time_ns, first_source_seq,
 * payloads) for every run before the run's blocks can be sent: the journal
 * holds what the line carries, as on the Python path.
 *
 * Sockets are passed per call as libzmq handles (pyzmq's Socket.underlying)
 * of live sockets the runner owns, so a socket made afresh (a rebind) is
 * never used stale. The libzmq functions are pyzmq's own, found at import
 * (adapter/_libzmq.h); adapter/source_pump.py checks the versions agree.
 *
 * Packets are built as proto/wire.py PacketBuilder.build builds them
 * (header ">2sBBHHIQHHQ": magic, version, flags 0, channel, adapter, term,
 * first msg_seq, count, 0, send time); the tests compare the blocks the
 * pump and the Python path put on the line, msg_seq by msg_seq.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <errno.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

#include "_libzmq.h" /* libzmq's API, taken from the libzmq pyzmq loaded (see there) */

#include "_pump_constants.h" /* HEADER_SIZE, VERSION, MAGIC_*, MAX_COUNT, STOP_*, PUMP_*: generated
                                from proto/wire.py and adapter/core/pumping.py by scripts/gen_constants.py */

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

static Libzmq Z;                /* pyzmq's libzmq (_libzmq.h), bound at import */
static char libzmq_path[4096]; /* where it was found */

static void *socket_of(Py_ssize_t address) { return (void *)(uintptr_t)address; }

static PyObject *zmq_failure(const char *what) {
    PyErr_Format(PyExc_OSError, "%s: %s", what, Z.strerror(Z.errno_()));
    return NULL;
}

/* ---- the pump ------------------------------------------------------------------------------ */

typedef struct {
    PyObject_HEAD
    PyObject *run;      /* the engine's run function (ConversionEngine.run_function()) */
    PyObject *frame_of; /* None (FIX: a frame is its messages), or the engine's source_frame */
    PyObject *journal; /* None, or journal(first_msg_seq, time_ns, first_source_seq, payloads) */
    PyObject *topic;   /* bytes: the line's topic (the channel name) */
    int channel, adapter, source_stream;
    Py_ssize_t max_packet; /* the packet budget, header included */
    Bytes packet;          /* the packet being filled: HEADER_SIZE bytes of room, then blocks */
    Bytes digests;         /* one run's digests, then the call's */
} PumpObject;

/* What one call of run() has done so far (its return value's fields). */
typedef struct {
    void *source, *sync, *control, *line;
    uint64_t term, expect, msg_seq; /* expect: the next source_seq (0: any); msg_seq: the next one */
    int want_payloads;
    uint32_t count_in_packet;
    uint64_t packet_first;
    PyObject *frames;           /* list of (frame, count) */
    Py_ssize_t frame_bytes;     /* their bytes (held until the core books them) */
    uint64_t first_source, first_msg, count;
    Py_ssize_t packets, bytes_sent;
    int64_t last_send_ns;
    PyObject *leftover;       /* list of parts, or NULL */
    PyObject *leftover_frame; /* the frame converted from it (the engine's source_frame), or NULL */
    Py_ssize_t leftover_pos, leftover_converted;
} Run;

static int packet_room(PumpObject *self, const Run *r, Py_ssize_t *room, Py_ssize_t *max_count) {
    Py_ssize_t left = self->max_packet - (Py_ssize_t)self->packet.len;
    *room = r->count_in_packet == 0 ? -left : (left > 0 ? left : 0); /* FastPath.run's convention */
    *max_count = MAX_COUNT - (Py_ssize_t)r->count_in_packet;
    return 0;
}

/* Seal the packet being filled and send it on the line: 0, or -1 with an exception. */
static int send_packet(PumpObject *self, Run *r) {
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
    if (Z.send(r->line, PyBytes_AS_STRING(self->topic), (size_t)PyBytes_GET_SIZE(self->topic), ZMQ_SNDMORE) < 0 ||
        Z.send(r->line, self->packet.data, self->packet.len, 0) < 0) {
        zmq_failure("sending a line packet");
        return -1;
    }
    r->packets++;
    r->bytes_sent += (Py_ssize_t)self->packet.len;
    r->last_send_ns = clock_ns(CLOCK_MONOTONIC);
    self->packet.len = HEADER_SIZE;
    r->count_in_packet = 0;
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

/* Book one run: journal it (before anything of it is sent), add its blocks and digests. */
static int take_run(PumpObject *self, Run *r, const RunResult *res, int64_t wall_ns) {
    if (res->count == 0) return 0;
    if (r->want_payloads && self->journal != Py_None) {
        PyObject *payloads = res->payloads;
        if (!PyList_Check(payloads) || PyList_GET_SIZE(payloads) != res->count) {
            PyErr_SetString(PyExc_TypeError, "a run asked for payloads must return one per message");
            return -1;
        }
        PyObject *done = PyObject_CallFunction(self->journal, "KLKO", (unsigned long long)r->msg_seq,
                                               (long long)wall_ns, res->first_seq, payloads);
        if (done == NULL) return -1;
        Py_DECREF(done);
    }
    if (bytes_reserve(&self->packet, (size_t)res->blocks_len) < 0 ||
        bytes_reserve(&self->digests, (size_t)res->digests_len) < 0)
        return -1;
    memcpy(self->packet.data + self->packet.len, res->blocks, (size_t)res->blocks_len);
    self->packet.len += (size_t)res->blocks_len;
    memcpy(self->digests.data + self->digests.len, res->digests, (size_t)res->digests_len);
    self->digests.len += (size_t)res->digests_len;
    if (r->count_in_packet == 0) r->packet_first = r->msg_seq;
    r->count_in_packet += (uint32_t)res->count;
    if (r->count == 0) {
        r->first_source = res->first_seq;
        r->first_msg = r->msg_seq;
    }
    r->count += (uint64_t)res->count;
    r->msg_seq += (uint64_t)res->count;
    r->expect = res->first_seq + (uint64_t)res->count;
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
        int added = PyList_Append(parts, data);
        Py_DECREF(data);
        if (added < 0) {
            Py_DECREF(parts);
            return NULL;
        }
        if (!more) return parts;
    }
}

/* One source message: 0 none waited, 1 converted whole, 2 handed back, -1 error. */
static int take_message(PumpObject *self, Run *r) {
    PyObject *parts = receive(r->source), *frame = NULL;
    if (parts == NULL) return PyErr_Occurred() ? -1 : 0;
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
    for (;;) {
        Py_ssize_t room, max_count;
        packet_room(self, r, &room, &max_count);
        PyObject *result = PyObject_CallFunction(self->run, "OnKKnnLiOO", frame, pos, (unsigned long long)r->expect,
                                                 0ULL, room, max_count, (long long)wall_ns, self->source_stream,
                                                 Py_True, r->want_payloads ? Py_True : Py_False);
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
        if (taken < 0) goto done;
        converted += res.count;
        pos = res.pos;
        if (res.stop == STOP_END && pos >= frame_len) break;
        if (res.stop == STOP_ROOM || res.stop == STOP_COUNT) {
            if (send_packet(self, r) < 0) goto done;
            continue;
        }
        outcome = hand_back(r, parts, frame, pos, converted); /* STOP_SLOW: the careful path */
        goto done;
    }
    if (converted) {
        PyObject *entry = Py_BuildValue("(On)", frame, converted);
        if (entry == NULL || PyList_Append(r->frames, entry) < 0) {
            Py_XDECREF(entry);
            goto done;
        }
        Py_DECREF(entry);
        r->frame_bytes += frame_len;
    }
    outcome = 1;
done:
    Py_XDECREF(frame);
    Py_DECREF(parts);
    return outcome;
}

static int readable(void *socket) {
    if (socket == NULL) return 0;
    int events = 0;
    size_t size = sizeof events;
    return Z.getsockopt(socket, ZMQ_EVENTS, &events, &size) == 0 && (events & ZMQ_POLLIN);
}

/* Wait for something to read until the deadline: 1 the source, 0 stop (*stop set), -1 error. */
static int wait_for_source(Run *r, int64_t deadline_ns, int *stop) {
    for (;;) {
        int64_t now = clock_ns(CLOCK_MONOTONIC);
        if (now >= deadline_ns) {
            *stop = PUMP_DEADLINE;
            return 0;
        }
        zmq_pollitem_t items[3] = {
            {r->source, 0, ZMQ_POLLIN, 0}, {r->sync, 0, ZMQ_POLLIN, 0}, {r->control, 0, ZMQ_POLLIN, 0}};
        int n = r->control != NULL ? 3 : 2, rc, error = 0;
        long timeout_ms = (long)((deadline_ns - now + 999999) / 1000000); /* rounded up, as the runner */
        Py_BEGIN_ALLOW_THREADS
        rc = Z.poll(items, n, timeout_ms);
        if (rc < 0) error = Z.errno_();
        Py_END_ALLOW_THREADS
        if (rc < 0) {
            if (error != EINTR) {
                zmq_failure("waiting for the source");
                return -1;
            }
            if (PyErr_CheckSignals() < 0) return -1;
            *stop = PUMP_SIGNAL;
            return 0;
        }
        if ((items[1].revents & ZMQ_POLLIN) || (n == 3 && (items[2].revents & ZMQ_POLLIN))) {
            *stop = PUMP_SOCKET;
            return 0;
        }
        if (items[0].revents & ZMQ_POLLIN) return 1;
    }
}

/* The pump's loop: 0 with *stop set, or -1 with an exception (what was done is in r either way).
   Frames are drained as they come; the packet goes out once nothing more waits, the packet is
   full, or the pump stops. The deadline is looked at after every frame too: a source that never
   pauses must not keep the core's timers waiting. */
static int pump(PumpObject *self, Run *r, int64_t deadline_ns, Py_ssize_t max_frames, Py_ssize_t max_bytes,
                int *stop) {
    Py_ssize_t frames = 0;
    for (;;) {
        int ready = wait_for_source(r, deadline_ns, stop);
        if (ready <= 0) return ready;
        for (;;) { /* drain what is queued */
            int taken = take_message(self, r);
            if (taken < 0) return -1;
            if (taken == 0) break;
            if (taken == 2) {
                *stop = PUMP_FRAME;
                return send_packet(self, r);
            }
            if (++frames >= max_frames || r->frame_bytes >= max_bytes) {
                *stop = PUMP_BUDGET;
                return send_packet(self, r);
            }
            if (readable(r->sync) || readable(r->control)) {
                *stop = PUMP_SOCKET;
                return send_packet(self, r);
            }
            if (clock_ns(CLOCK_MONOTONIC) >= deadline_ns) {
                *stop = PUMP_DEADLINE;
                return send_packet(self, r);
            }
        }
        if (send_packet(self, r) < 0) return -1;
    }
}

PyDoc_STRVAR(Pump_run_doc,
             "run(source, sync, control, line, deadline_ns, expect_seq, next_msg_seq, term, journal, max_frames,\n"
             "    max_bytes)\n"
             "--\n\n"
             "Pump source messages into line packets until something needs the core (see the module doc).\n"
             "Sockets are libzmq handles (pyzmq's Socket.underlying; control 0 when there is none);\n"
             "deadline_ns is on the monotonic clock. Returns adapter.core.pumping.Pumped's fields.");

static PyObject *Pump_run(PumpObject *self, PyObject *args) {
    Py_ssize_t source, sync, control, line, max_frames, max_bytes;
    long long deadline_ns;
    unsigned long long expect, msg_seq, term;
    int journal;
    if (!PyArg_ParseTuple(args, "nnnnLKKKpnn:run", &source, &sync, &control, &line, &deadline_ns, &expect,
                          &msg_seq, &term, &journal, &max_frames, &max_bytes))
        return NULL;
    if (source == 0 || sync == 0 || line == 0 || max_frames < 1 || max_bytes < 1 || term > 0xFFFFFFFFULL) {
        PyErr_SetString(PyExc_ValueError, "a socket is missing, max_frames or max_bytes < 1, or term out of range");
        return NULL;
    }
    if (journal && self->journal == Py_None) {
        PyErr_SetString(PyExc_ValueError, "journal asked for but the pump has no journal function");
        return NULL;
    }
    Run r = {.source = socket_of(source), .sync = socket_of(sync), .control = control ? socket_of(control) : NULL,
             .line = socket_of(line), .term = term, .expect = expect, .msg_seq = msg_seq, .want_payloads = journal};
    if ((r.frames = PyList_New(0)) == NULL) return NULL;
    self->packet.len = HEADER_SIZE;
    self->digests.len = 0; /* every run's digests, appended as the runs go (take_run) */
    int stop = PUMP_DEADLINE;
    PyObject *error = NULL;
    if (pump(self, &r, (int64_t)deadline_ns, max_frames, max_bytes, &stop) < 0) {
        /* What went out must still be booked, or the core would number it again: the error
           goes back with it (PUMP_ERROR), and the runner raises it once the core booked it. */
        PyObject *type, *traceback;
        PyErr_Fetch(&type, &error, &traceback);
        PyErr_NormalizeException(&type, &error, &traceback);
        if (error != NULL && traceback != NULL) PyException_SetTraceback(error, traceback);
        Py_XDECREF(type);
        Py_XDECREF(traceback);
        stop = PUMP_ERROR;
        if (r.count_in_packet) { /* blocks booked but not sent: nobody saw them; send them now */
            PyObject *t2, *v2, *tb2;
            PyErr_Fetch(&t2, &v2, &tb2);
            if (send_packet(self, &r) < 0) PyErr_Clear();
            PyErr_Restore(t2, v2, tb2);
        }
    }
    PyObject *result = Py_BuildValue(
        "(iOKKKy#nnLOOnnO)", stop, r.frames, r.first_source, r.first_msg, r.count, (const char *)self->digests.data,
        (Py_ssize_t)self->digests.len, r.packets, r.bytes_sent, (long long)r.last_send_ns,
        r.leftover ? r.leftover : Py_None, r.leftover_frame ? r.leftover_frame : Py_None, r.leftover_pos,
        r.leftover_converted, error ? error : Py_None);
    Py_XDECREF(error);
    Py_DECREF(r.frames);
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
    if (!PyCallable_Check(run) || (frame_of != Py_None && !PyCallable_Check(frame_of)) ||
        (journal != Py_None && !PyCallable_Check(journal))) {
        PyErr_SetString(PyExc_TypeError, "run must be callable, frame_of and journal callable or None");
        return NULL;
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
    if (bytes_reserve(&self->packet, (size_t)max_packet + 4096) < 0) {
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
    PyMem_Free(self->packet.data);
    PyMem_Free(self->digests.data);
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
              "source -> line path in C.",
    .tp_new = Pump_new,
    .tp_methods = Pump_methods,
};

static PyObject *zmq_version_of(PyObject *Py_UNUSED(module), PyObject *Py_UNUSED(args)) {
    int major, minor, patch;
    Z.version(&major, &minor, &patch);
    return Py_BuildValue("(iii)", major, minor, patch);
}

static PyMethodDef module_methods[] = {
    {"zmq_version_info", zmq_version_of, METH_NOARGS, "The version of the libzmq this extension is linked to."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    .m_base = PyModuleDef_HEAD_INIT,
    .m_name = "feedha.adapter._pump",
    .m_doc = "The active adapter's source -> line path in C (see adapter/_pump.c).",
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
