/* SPDX-License-Identifier: MIT */
/* Fuzz the escalation request parser (what a sandbox sends after the mTLS
 * handshake): any bytes are parsed or refused with a reason, never crash;
 * an accepted request has every field within its limits. */
#include <assert.h>
#include <errno.h>
#include <stdint.h>
#include <string.h>

#include "escalate-proto.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        EscalateRequest r;
        const char *why = NULL;
        int q = escalate_request_parse((const char *) data, size, &r, &why);
        if (q < 0) {
                assert(q == -ENOMEM || (q == -EBADMSG && why));
                return 0;
        }
        assert(strlen(r.request_id) == 36 && strlen(r.session_id) == 36);
        assert(strlen(r.command) >= 1 && strlen(r.command) <= ESCALATE_COMMAND_MAX);
        assert(strlen(r.justification) <= ESCALATE_JUSTIFICATION_MAX);
        assert(r.timestamp >= 0);
        escalate_request_done(&r);
        return 0;
}
