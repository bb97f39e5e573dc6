/*
 * feedha.transport._drain: a line's queued messages, received in one call.
 *
 * Theory of operation
 * -------------------
 * A subscriber's line carries two-part messages, [topic, packet]. Received
 * with pyzmq, each costs a Frame object per part, its copy to bytes, a more
 * flag read per part (transport/frames.py recv_frames: 3-4 us a message),
 * and the drain ends either with a ZMQ_EVENTS query or with a receive that
 * fails, which pyzmq turns into a ZMQError built with its message (~3.6 us).
 * At 10k msg/s a packet carries one message, so that is paid a message on
 * every line. drain() does the same receives with libzmq's own calls:
 *
 *   drain(socket, topic, limit) -> list
 *
 * receives up to limit messages without waiting and returns one item each,
 * in order:
 *
 *   bytes           the packet of a message [topic, packet] (topic equal, not
 *                   a prefix: SUB filters by prefix, "EQ1" also matches "EQ10");
 *   OTHER_TOPIC     a two-part message of another topic;
 *   WRONG_PARTS     a message of one part or of more than two (the parts are
 *                   read and dropped: only the packet is ever copied, so a
 *                   hostile message of many parts costs nothing but its reads).
 *
 * It stops early when nothing more is queued (EAGAIN) or a signal interrupts
 * (EINTR: the interpreter runs the handler at its next check); any other
 * libzmq error raises zmq.ZMQError with its errno, as pyzmq would, after the
 * messages already received are dropped. The GIL is kept: a receive that does
 * not wait never blocks, and letting go and taking it back around each part
 * would cost what the call saves.
 *
 * The socket is a libzmq handle (pyzmq's Socket.underlying) of a live socket
 * the caller owns; the functions are pyzmq's own libzmq, found at import
 * (transport/_libzmq.h). transport/frames.py checks that the versions agree
 * and keeps a pure-Python drain with the same results (the tests compare the
 * two on real sockets).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <errno.h>
#include <string.h>

#include "_drain_constants.h" /* WRONG_PARTS, OTHER_TOPIC (transport/frames.py) */
#include "_libzmq.h"          /* libzmq's API, taken from the libzmq pyzmq loaded (see there) */

static Libzmq Z;               /* pyzmq's libzmq (_libzmq.h), bound at import */
static char libzmq_path[4096]; /* where it was found */
static PyObject *ZMQError;     /* zmq.ZMQError */

static void raise_zmq(int error) {
    PyObject *exc = PyObject_CallFunction(ZMQError, "i", error);
    if (exc != NULL) {
        PyErr_SetObject(ZMQError, exc);
        Py_DECREF(exc);
    }
}

/* Read and drop the rest of a message whose parts are not wanted (part: the last one read). */
static void drop_rest(void *socket, zmq_msg_t *part) {
    while (Z.msg_more(part)) {
        Z.msg_close(part);
        Z.msg_init(part);
        if (Z.msg_recv(part, socket, ZMQ_DONTWAIT) < 0) break; /* the parts of a message come together */
    }
}

/* One message into *item (a new reference); 0 when there was none, -1 with the libzmq errno. */
static int receive_one(void *socket, const char *topic, size_t topic_size, PyObject **item, int *error) {
    zmq_msg_t part;
    Z.msg_init(&part);
    if (Z.msg_recv(&part, socket, ZMQ_DONTWAIT) < 0) {
        *error = Z.errno_();
        Z.msg_close(&part);
        return *error == EAGAIN || *error == EINTR ? 0 : -1;
    }
    int is_topic = Z.msg_size(&part) == topic_size && memcmp(Z.msg_data(&part), topic, topic_size) == 0;
    if (!Z.msg_more(&part)) {
        Z.msg_close(&part);
        *item = PyLong_FromLong(WRONG_PARTS);
        return *item == NULL ? -2 : 1;
    }
    Z.msg_close(&part);
    Z.msg_init(&part);
    if (Z.msg_recv(&part, socket, ZMQ_DONTWAIT) < 0) { /* cannot happen: the parts come together */
        *error = Z.errno_();
        Z.msg_close(&part);
        return -1;
    }
    if (Z.msg_more(&part)) {
        drop_rest(socket, &part);
        Z.msg_close(&part);
        *item = PyLong_FromLong(WRONG_PARTS);
    } else if (!is_topic) {
        Z.msg_close(&part);
        *item = PyLong_FromLong(OTHER_TOPIC);
    } else {
        *item = PyBytes_FromStringAndSize(Z.msg_data(&part), (Py_ssize_t)Z.msg_size(&part));
        Z.msg_close(&part);
    }
    return *item == NULL ? -2 : 1;
}

static PyObject *drain(PyObject *Py_UNUSED(module), PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 3 || !PyLong_Check(args[0]) || !PyBytes_Check(args[1]) || !PyLong_Check(args[2])) {
        PyErr_SetString(PyExc_TypeError, "drain(socket: int, topic: bytes, limit: int)");
        return NULL;
    }
    void *socket = PyLong_AsVoidPtr(args[0]);
    if (socket == NULL) {
        if (!PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "drain: no socket (address 0)");
        return NULL;
    }
    Py_ssize_t limit = PyLong_AsSsize_t(args[2]);
    if (limit < 0) {
        if (!PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "drain: limit must be >= 0");
        return NULL;
    }
    const char *topic = PyBytes_AS_STRING(args[1]);
    size_t topic_size = (size_t)PyBytes_GET_SIZE(args[1]);
    PyObject *out = PyList_New(0);
    if (out == NULL) return NULL;
    for (Py_ssize_t n = 0; n < limit; n++) {
        PyObject *item = NULL;
        int error = 0;
        int got = receive_one(socket, topic, topic_size, &item, &error);
        if (got == 0) break;
        if (got < 0) {
            Py_DECREF(out);
            if (got == -1) raise_zmq(error);
            return NULL;
        }
        int appended = PyList_Append(out, item);
        Py_DECREF(item);
        if (appended < 0) {
            Py_DECREF(out);
            return NULL;
        }
    }
    return out;
}

static PyObject *zmq_version_of(PyObject *Py_UNUSED(module), PyObject *Py_UNUSED(args)) {
    int major, minor, patch;
    Z.version(&major, &minor, &patch);
    return Py_BuildValue("(iii)", major, minor, patch);
}

static PyMethodDef module_methods[] = {
    {"zmq_version_info", zmq_version_of, METH_NOARGS, "The version of the libzmq this extension is bound to."},
    {"drain", (PyCFunction)(void (*)(void))drain, METH_FASTCALL,
     "drain(socket, topic, limit) -> list: up to limit queued messages of the libzmq socket at address "
     "socket (pyzmq's Socket.underlying), without waiting: the packet (bytes) of each [topic, packet], "
     "OTHER_TOPIC for another topic, WRONG_PARTS for a message not of two parts; zmq.ZMQError on a "
     "libzmq error."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    .m_base = PyModuleDef_HEAD_INIT,
    .m_name = "feedha.transport._drain",
    .m_doc = "A line's queued messages, received in one call (see transport/_drain.c).",
    .m_size = -1,
    .m_methods = module_methods,
};

PyMODINIT_FUNC PyInit__drain(void) {
    char why[8400];
    PyObject *zmq = PyImport_ImportModule("zmq"); /* pyzmq loads its libzmq: the one to bind to */
    if (zmq == NULL) return NULL;
    ZMQError = PyObject_GetAttrString(zmq, "ZMQError");
    Py_DECREF(zmq);
    if (ZMQError == NULL) return NULL;
    if (libzmq_bind(&Z, libzmq_path, sizeof libzmq_path, why, sizeof why) < 0) {
        PyErr_Format(PyExc_ImportError, "feedha.transport._drain: %s", why);
        return NULL;
    }
    PyObject *m = PyModule_Create(&module);
    if (m == NULL) return NULL;
    if (fh_add_constants(m) < 0 || PyModule_AddStringConstant(m, "libzmq_path", libzmq_path) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
