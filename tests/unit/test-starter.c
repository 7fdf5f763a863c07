/* SPDX-License-Identifier: MIT */
/* Unit tests of the starter configuration and of init --agent's profile:
 * ca_certificates = "host" is written only where the host trusts
 * authorities of its own (commented out otherwise), and every preset's
 * profile is TOML whose only keys are preset and that line, each key the
 * preset gives shown as a comment. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "presets.h"
#include "starter.h"
#include "toml.h"

static TomlValue *parse(const char *text) {
        TomlLimits lim = { .max_depth = 8, .max_string = 65536 };
        TomlError te = {};
        TomlValue *root = NULL;
        if (toml_parse(text, strlen(text), &lim, &root, &te) < 0)
                fail_msg("not TOML at %u:%u: %s\n%s", te.pos.line, te.pos.col, te.message, text);
        return root;
}

static void test_starter_ca(void **state) {
        (void) state;
        StarterHost h = { .sandbox_network_ok = true };
        char *text = NULL;
        assert_int_equal(starter_config(&h, &text), 0);
        assert_null(strstr(text, "\nca_certificates = \"host\"\n"));
        assert_non_null(strstr(text, "\n# ca_certificates = \"host\"\n"));
        toml_free(parse(text));
        free(text);
        h.local_cas = true;
        assert_int_equal(starter_config(&h, &text), 0);
        assert_non_null(strstr(text, "\nca_certificates = \"host\"\n"));
        TomlValue *root = parse(text);
        const TomlEntry *p = toml_table_get(root, "profiles");
        const TomlEntry *sh = p ? toml_table_get(p->value, "shell") : NULL;
        const TomlEntry *ca = sh ? toml_table_get(sh->value, "ca_certificates") : NULL;
        assert_non_null(ca);
        assert_string_equal(ca->value->str.s, "host");
        toml_free(root);
        free(text);
}

static void test_agent_profiles(void **state) {
        (void) state;
        for (size_t i = 0; i < presets_n; i++)
                for (int cas = 0; cas < 2; cas++) {
                        StarterHost h = { .local_cas = cas };
                        char *text = NULL;
                        assert_int_equal(starter_agent_profile("pp", &presets[i], &h, &text), 0);
                        TomlValue *root = parse(text);
                        const TomlEntry *p = toml_table_get(root, "profiles");
                        assert_non_null(p);
                        const TomlEntry *pp = toml_table_get(p->value, "pp");
                        assert_non_null(pp);
                        assert_int_equal(pp->value->table.n, cas ? 2 : 1);
                        assert_string_equal(toml_table_get(pp->value, "preset")->value->str.s, presets[i].name);
                        /* Each of the preset's lines, as a comment. */
                        for (const char *line = presets[i].body; *line;) {
                                size_t n = strcspn(line, "\n");
                                char *want = NULL;
                                assert_true(asprintf(&want, "\n#   %.*s\n", (int) n, line) > 0);
                                if (!strstr(text, want))
                                        fail_msg("%s: missing %s", presets[i].name, want);
                                free(want);
                                line += n + (line[n] == '\n');
                        }
                        toml_free(root);
                        free(text);
                }
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_starter_ca),
                cmocka_unit_test(test_agent_profiles),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
