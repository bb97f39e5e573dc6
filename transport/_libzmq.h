/*
 * The part of libzmq's C API the source pump (adapter/_pump.c) and the line
 * drain (transport/_drain.c) call, taken from the libzmq that pyzmq loaded.
 *
 * Theory of operation
 * -------------------
 * The pump works on sockets the runner made with pyzmq (their libzmq handles,
 * pyzmq's Socket.underlying), so it must call the very library pyzmq uses: a
 * socket of one copy of libzmq handed to the functions of another would be
 * read with another copy's globals and layout. Which copy that is depends on
 * how pyzmq was installed -- built against the system's libzmq (scripts/setup
 * does, for epgm://), or a wheel that carries its own under another name -- so
 * this extension links no libzmq at all. At import it looks among the shared
 * objects the process has loaded (dl_iterate_phdr) for the one libzmq, opens
 * that one again by its path without loading anything (RTLD_NOLOAD) and takes
 * the functions below from it (the module imports zmq first, so pyzmq's is
 * loaded). None found, or more than one (which would be pyzmq's is not known),
 * fails the import with the reason, and the adapter goes on without the pump
 * (adapter/source_pump.py).
 *
 * The declarations are libzmq's stable 4.x ABI (zmq.h): a message is 64 opaque
 * bytes aligned as a pointer, a poll item is (socket, fd, events, revents), and
 * the flag and option numbers never changed. No zmq.h is needed to build.
 */
#ifndef FEEDHA_LIBZMQ_H
#define FEEDHA_LIBZMQ_H

#include <dlfcn.h>
#include <link.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

typedef struct {
    unsigned char bytes[64];
} __attribute__((aligned(sizeof(void *)))) zmq_msg_t;

typedef struct {
    void *socket;
    int fd;
    short events;
    short revents;
} zmq_pollitem_t;

enum { ZMQ_DONTWAIT = 1, ZMQ_SNDMORE = 2, ZMQ_POLLIN = 1, ZMQ_FD = 14, ZMQ_EVENTS = 15 };

/* The functions, as pyzmq's libzmq has them. */
typedef struct {
    int (*poll)(zmq_pollitem_t *items, int count, long timeout);
    int (*msg_init)(zmq_msg_t *msg);
    int (*msg_recv)(zmq_msg_t *msg, void *socket, int flags);
    int (*msg_close)(zmq_msg_t *msg);
    void *(*msg_data)(zmq_msg_t *msg);
    size_t (*msg_size)(const zmq_msg_t *msg);
    int (*msg_more)(const zmq_msg_t *msg);
    int (*send)(void *socket, const void *buf, size_t len, int flags);
    int (*getsockopt)(void *socket, int option, void *value, size_t *size);
    int (*errno_)(void);
    const char *(*strerror)(int errnum);
    void (*version)(int *major, int *minor, int *patch);
} Libzmq;

typedef struct {
    int found;           /* loaded objects named libzmq*.so* */
    char path[4096];     /* the first one's path */
    char other[4096];    /* a second one's, if any */
} LibzmqSearch;

static int libzmq_visit(struct dl_phdr_info *info, size_t size, void *data) {
    (void)size;
    LibzmqSearch *search = data;
    const char *path = info->dlpi_name, *base;
    if (path == NULL || !*path) return 0;
    base = strrchr(path, '/');
    base = base ? base + 1 : path;
    if (strncmp(base, "libzmq", 6) != 0 || strstr(base, ".so") == NULL) return 0;
    char *into = search->found ? search->other : search->path;
    if (search->found == 0 || strcmp(search->path, path) != 0) {
        snprintf(into, sizeof search->path, "%s", path);
        search->found++;
    }
    return 0;
}

/* Fill z from the one libzmq loaded: 0 (its path in path), or -1 with why (for ImportError). */
static int libzmq_bind(Libzmq *z, char *path, size_t path_size, char *why, size_t why_size) {
    LibzmqSearch search = {0};
    dl_iterate_phdr(libzmq_visit, &search);
    if (search.found == 0) {
        snprintf(why, why_size, "pyzmq is imported but no libzmq*.so is loaded (a static build?)");
        return -1;
    }
    if (search.found > 1) {
        snprintf(why, why_size, "two libzmq are loaded (%s and %s): which one pyzmq uses is not known",
                 search.path, search.other);
        return -1;
    }
    snprintf(path, path_size, "%s", search.path);
    void *lib = dlopen(search.path, RTLD_NOW | RTLD_NOLOAD | RTLD_LOCAL);
    if (lib == NULL) {
        snprintf(why, why_size, "cannot open the loaded %s: %s", search.path, dlerror());
        return -1;
    }
    struct {
        const char *name;
        void **slot;
    } wanted[] = {
        {"zmq_poll", (void **)&z->poll},         {"zmq_msg_init", (void **)&z->msg_init},
        {"zmq_msg_recv", (void **)&z->msg_recv}, {"zmq_msg_close", (void **)&z->msg_close},
        {"zmq_msg_data", (void **)&z->msg_data}, {"zmq_msg_size", (void **)&z->msg_size},
        {"zmq_msg_more", (void **)&z->msg_more}, {"zmq_send", (void **)&z->send},
        {"zmq_getsockopt", (void **)&z->getsockopt}, {"zmq_errno", (void **)&z->errno_},
        {"zmq_strerror", (void **)&z->strerror}, {"zmq_version", (void **)&z->version},
    };
    for (size_t i = 0; i < sizeof wanted / sizeof wanted[0]; i++) {
        *wanted[i].slot = dlsym(lib, wanted[i].name);
        if (*wanted[i].slot == NULL) {
            snprintf(why, why_size, "%s has no %s", search.path, wanted[i].name);
            return -1; /* the handle stays open: the library stays loaded as long as pyzmq anyway */
        }
    }
    return 0;
}

#endif
