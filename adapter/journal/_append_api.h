/*
 * The journal writer's C entry, for another extension (adapter/_pump.c) to append records with
 * no call into Python on the common path.
 *
 * adapter/journal/_native.c exports it as the capsule FH_APPEND_CAPSULE (the module's
 * APPEND_API); a user gets it once with PyCapsule_Import(FH_APPEND_CAPSULE, 0) and checks
 * `version`. An Appender (`appender_type`) is a journal writer's live tail (JournalWriter's
 * buffer, published end, limits and last msg_seq, adapter/journal/writer.py); append_run frames
 * what fits there in C and hands the rest to the writer's append_batch (see _native.c, "the
 * writer's live tail").
 */
#ifndef FEEDHA_ADAPTER_JOURNAL_APPEND_API_H
#define FEEDHA_ADAPTER_JOURNAL_APPEND_API_H

#include <stdint.h>

#define FH_APPEND_CAPSULE "feedha.adapter.journal._native.APPEND_API"
#define FH_APPEND_API_VERSION 1

typedef struct {
    int version; /* FH_APPEND_API_VERSION */
    PyTypeObject *appender_type;
    /* Append records first_msg_seq, first_msg_seq + 1, ... (one a payload: a list of bytes) with
       one time_ns, their source_seqs first_source_seq, ... : 0, or -1 with an exception (the
       writer's: the records before the one it refused are appended, as append_batch does). */
    int (*append_run)(PyObject *appender, uint64_t first_msg_seq, uint64_t time_ns, unsigned int source_stream,
                      uint64_t first_source_seq, PyObject *payloads);
} FhAppendApi;

#endif /* FEEDHA_ADAPTER_JOURNAL_APPEND_API_H */
