/* SPDX-License-Identifier: MIT */
#pragma once

/* The participant driver (issue 17, decision 12): the one code that walks a
 * resource through the Domain Store's states. Every resource a Domain makes
 * is a participant of some kind; a kind says how to make it (acquire) and
 * how to remove it from what its record says (release), and the driver
 * does the rest, the same way for a start, a teardown, a failed start and
 * the recovery of what a dead coordinator left:
 *
 *   begin:   Intent (ownership known beforehand) -> acquire -> Committed
 *            (what acquire learnt merged in); a failed acquire is ended
 *            like any participant
 *   end:     ReleaseIntent -> release(recorded ownership) -> Clean, and
 *            Clean only when release says nothing is left
 *   recover: every record not Clean, in the kinds' order, ended
 *
 * So a resource is either released or still recorded (not Clean) for the
 * next recovery, whatever step fails: a record that cannot be written
 * before acquire means no acquire; one that cannot be written after
 * leaves the earlier, unclean state, which recovery ends. release must be
 * idempotent and must work from the ownership alone (obj NULL): that is all
 * a recovery has. */

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "store.h"

typedef struct PartKind {
        ParticipantRole role;
        /* Recovery ends lower passes first (an overlay before the image
         * mount under it). */
        int recover_pass;
        /* A successful acquire leaves the record Prepared, not Committed
         * (the network: attested, its probes still to come). */
        bool acquire_prepares;
        /* Make the resource described by intent (the recorded ownership; a
         * borrowed reference). On success *ret_commit may hold fields to
         * merge into the record (a new reference, or NULL). On failure
         * -errno and *ret_error (may stay NULL); what it made part of is
         * then released by the driver. */
        int (*acquire)(void *ctx, void *obj, json_t *intent, json_t **ret_commit, char **ret_error);
        /* Remove what own (the recorded ownership, borrowed) describes; obj
         * is the live object when the coordinator still has it, NULL in a
         * recovery. 0 when nothing of it is left, -errno when something
         * is (the record then stays for the next recovery). */
        int (*release)(void *ctx, void *obj, json_t *own, uint64_t generation);
} PartKind;

/* The store operations the driver uses: the Domain Store's (part_store_of),
 * or a test's. Each takes ownership of none of its arguments. */
typedef struct PartStore {
        void *userdata;
        int (*add)(void *userdata, uint64_t generation, ParticipantRole role, json_t *own, uint64_t *ret_id);
        int (*set_state)(void *userdata, uint64_t id, ParticipantState state, json_t *own);
        int (*update)(void *userdata, uint64_t id, json_t *own);
        int (*get)(void *userdata, uint64_t id, json_t **ret);
        int (*list_unclean)(void *userdata, json_t **ret);
} PartStore;

PartStore part_store_of(Store *s);

/* A participant the caller holds: id 0 when there is none. */
typedef struct Part {
        const PartKind *kind;
        uint64_t id, generation;
} Part;

/* Record intent (taken), acquire, commit. On failure -errno (with
 * *ret_error from acquire, or NULL), and the participant has been ended;
 * *ret stays empty. */
int part_begin(const PartStore *ps, uint64_t generation, const PartKind *k, json_t *intent, void *ctx, void *obj,
               Part *ret, char **ret_error);

/* Merge fields (taken) into the record; with state >= 0 also move it there
 * (Prepared, Committed). */
int part_update(const PartStore *ps, const Part *p, int state, json_t *fields);

/* ReleaseIntent, release, Clean. *p is emptied whatever happens (a record
 * left unclean is the recovery's). Returns release's result. A Part
 * without id is nothing to do (0). */
int part_end(const PartStore *ps, Part *p, void *ctx, void *obj);

/* Every unclean record of the store, by the kinds' recover_pass: ended
 * from its ownership. A record of a role no kind covers is an error
 * (-EPROTO, left alone). Returns how many were removed, or -EIO when one
 * could not be (the others are still tried). */
int part_recover(const PartStore *ps, const PartKind *const *kinds, size_t n_kinds, void *ctx);
