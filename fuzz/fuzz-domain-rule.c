/* SPDX-License-Identifier: MIT */
/* Fuzz the host names and rules of egress by name (domain-rule.h). The
 * input is both a name for domain_name_canonical (all its bytes, NULs
 * included) and, up to its first NUL, a rule for domain_rule_parse.
 * Invariants: a canonical name is LDH, lower case, at most 253 bytes and
 * canonical again unchanged; a refusal has a reason; a parsed rule formats
 * and parses back to itself and matches its own name (a wildcard: one more
 * label, never the bare suffix) at its own port and no other; a plain name
 * parses as a rule exactly when it canonicalizes. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "domain-rule.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_reason(const char *why) {
        if (!why || why[0] == '\0' || why[strlen(why) - 1] == '.')
                abort();
}

static void check_canonical(const char *name) {
        char again[DOMAIN_NAME_MAX + 1];
        const char *why = NULL;
        size_t len = strlen(name);
        if (len == 0 || len > DOMAIN_NAME_MAX || name[0] == '.' || name[len - 1] == '.')
                abort();
        for (size_t i = 0; i < len; i++)
                if (!((name[i] >= 'a' && name[i] <= 'z') || (name[i] >= '0' && name[i] <= '9') || name[i] == '-' ||
                      name[i] == '.'))
                        abort();
        if (domain_name_canonical(name, len, again, &why) < 0 || strcmp(again, name) != 0)
                abort();
}

static void check_rule(const DomainRule *r) {
        char buf[DOMAIN_NAME_MAX + 9], probe[DOMAIN_NAME_MAX + 5];
        const char *why = NULL;
        DomainRule back;

        check_canonical(r->name);
        if (r->port == 0 || (r->wildcard && !strchr(r->name, '.')))
                abort();

        /* The documented buffer size is enough: nothing more in a big one. */
        char big[2 * sizeof(buf)];
        domain_rule_format(r, buf, sizeof(buf));
        domain_rule_format(r, big, sizeof(big));
        if (strcmp(buf, big) != 0 || domain_rule_parse(buf, &back, &why) < 0)
                abort();
        if (back.wildcard != r->wildcard || back.port != r->port || strcmp(back.name, r->name) != 0)
                abort();

        uint16_t other = (uint16_t) (r->port == 65535 ? 1 : r->port + 1);
        bool listed = false;
        if (!r->wildcard) {
                if (!domain_rule_match(r, r->name, r->port) || domain_rule_match(r, r->name, other))
                        abort();
                if (domain_rules_find(r, 1, r->name, r->port, NULL) != r)
                        abort();
                if (domain_rules_find(r, 1, r->name, other, &listed) != NULL || !listed)
                        abort();
                return;
        }
        snprintf(probe, sizeof(probe), "x.%s", r->name);
        if (!domain_rule_match(r, probe, r->port) || domain_rule_match(r, probe, other))
                abort();
        if (domain_rule_match(r, r->name, r->port))
                abort();
        snprintf(probe, sizeof(probe), "x.y.%s", r->name);
        if (domain_rule_match(r, probe, r->port))
                abort();
        if (domain_rules_find(r, 1, r->name, r->port, &listed) != NULL || listed)
                abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        if (size > 4096)
                return 0;

        char out[DOMAIN_NAME_MAX + 1];
        const char *why = NULL;
        int name_r = domain_name_canonical((const char *) data, size, out, &why);
        if (name_r == 0)
                check_canonical(out);
        else
                check_reason(why);

        char *s = malloc(size + 1);
        if (!s)
                return 0;
        memcpy(s, data, size);
        s[size] = '\0';

        DomainRule r;
        why = NULL;
        int rule_r = domain_rule_parse(s, &r, &why);
        if (rule_r == 0)
                check_rule(&r);
        else
                check_reason(why);

        /* Without ':' or '*' (or a NUL cutting the rule short) a rule is
         * just a name at the default port. */
        if (!memchr(data, '\0', size) && !memchr(data, ':', size) && !memchr(data, '*', size)) {
                if ((rule_r == 0) != (name_r == 0))
                        abort();
                if (rule_r == 0 && (r.wildcard || r.port != DOMAIN_PORT_DEFAULT || strcmp(r.name, out) != 0))
                        abort();
        }
        free(s);
        return 0;
}
