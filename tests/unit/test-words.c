/* SPDX-License-Identifier: MIT */
/* The metacharacter check and auto-approve matching (spec §5.2.1). The
 * splitter itself is compared with Python's shlex.split by
 * tests/words-oracle.py. */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "autoapprove.h"
#include "prompt-text.h"
#include "words.h"

static void test_metachar(void **state) {
        (void) state;
        static const char *const bad[] = { "a; rm -rf ~", "a | b", "a & b", "echo $(id)", "echo `id`",  "a > f",
                                           "a < f",       "a\nb",  "a\rb",  "a\\ b",      "echo $HOME", "(a)",
                                           "a\x01",       "a\x7f", "a\tb",  "a\x1b[2J" };
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
                if (!words_metachar(bad[i], strlen(bad[i])))
                        fail_msg("no metacharacter found in %s", bad[i]);
        const char *s = "ls -l; id";
        assert_ptr_equal(words_metachar(s, strlen(s)), s + 5);
        static const char *const good[] = { "ls -l /tmp",          "cat 'a b' \"c d\"", "du -sh .",
                                            "echo é 日本 🙂", "printf %s x",       "ls *.c ~ #x {a,b} !x" };
        for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++)
                assert_null(words_metachar(good[i], strlen(good[i])));
        /* A NUL byte is a control character too. */
        assert_non_null(words_metachar("a\0b", 3));
}

static void test_split_basics(void **state) {
        (void) state;
        char **v = NULL;
        size_t n = 0;
        const char *why = NULL;
        const char *in = "a 'b c' \"d\\\"e\" '' f\\ g";
        assert_int_equal(words_split(in, strlen(in), &v, &n, &why), 0);
        assert_int_equal(n, 5);
        assert_string_equal(v[0], "a");
        assert_string_equal(v[1], "b c");
        assert_string_equal(v[2], "d\"e");
        assert_string_equal(v[3], "");
        assert_string_equal(v[4], "f g");
        assert_null(v[5]);
        words_free(v);
        assert_int_equal(words_split("a\0b", 3, &v, &n, &why), -EINVAL);
        assert_string_equal(why, "a NUL byte");
        assert_int_equal(words_split("'a", 2, &v, &n, &why), -EINVAL);
        assert_string_equal(why, "no closing quotation");
        assert_int_equal(words_split("a\\", 2, &v, &n, &why), -EINVAL);
        assert_string_equal(why, "nothing after the backslash");
        assert_int_equal(words_split("  ", 2, &v, &n, &why), 0);
        assert_int_equal(n, 0);
        assert_null(v[0]);
        words_free(v);
}

static AutoApproveRule rule(const char *entry) {
        AutoApproveRule r;
        char *why = NULL;
        int q = autoapprove_rule_parse(entry, AUTOAPPROVE_SEARCH_PATH, &r, &why);
        if (q < 0)
                fail_msg("%s: %s", entry, why ? why : strerror(-q));
        return r;
}

/* A workspace for the matcher: README.md, src/main.c, a symlink that
 * leaves it and one that stays in it. */
static int ws_fd = -1;
static char ws_dir[64];

static int setup_ws(void **state) {
        (void) state;
        strcpy(ws_dir, "/tmp/lazaret-aa-XXXXXX");
        if (!mkdtemp(ws_dir))
                return -1;
        char p[128];
        snprintf(p, sizeof(p), "%s/README.md", ws_dir);
        FILE *f = fopen(p, "w");
        if (!f)
                return -1;
        fclose(f);
        snprintf(p, sizeof(p), "%s/src", ws_dir);
        mkdir(p, 0755);
        snprintf(p, sizeof(p), "%s/src/main.c", ws_dir);
        if (!(f = fopen(p, "w")))
                return -1;
        fclose(f);
        snprintf(p, sizeof(p), "%s/shadow", ws_dir);
        if (symlink("/etc/shadow", p) < 0)
                return -1;
        snprintf(p, sizeof(p), "%s/up", ws_dir);
        if (symlink("../../etc", p) < 0)
                return -1;
        snprintf(p, sizeof(p), "%s/readme", ws_dir);
        if (symlink("README.md", p) < 0)
                return -1;
        ws_fd = open(ws_dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
        return ws_fd < 0 ? -1 : 0;
}

static int teardown_ws(void **state) {
        (void) state;
        char cmd[128];
        close(ws_fd);
        snprintf(cmd, sizeof(cmd), "rm -rf '%s'", ws_dir);
        return system(cmd) == 0 ? 0 : -1;
}

static bool match(const AutoApproveRule *r, const char *request) {
        char **v = NULL;
        size_t n = 0;
        const char *why = NULL;
        assert_int_equal(words_split(request, strlen(request), &v, &n, &why), 0);
        bool m = autoapprove_match(r, v, n, AUTOAPPROVE_SEARCH_PATH, ws_fd);
        words_free(v);
        return m;
}

static void test_match(void **state) {
        (void) state;
        AutoApproveRule ls_l = rule("ls -l"), ls = rule("ls ..."), uname = rule("/usr/bin/uname -a"),
                        cat = rule("cat README.md"), catp = rule("cat ..."), host = rule("cat /etc/hostname");
        assert_string_equal(ls_l.argv[0], "/usr/bin/ls");
        assert_int_equal(ls_l.argc, 2);
        assert_false(ls_l.prefix);
        assert_true(ls.prefix);
        assert_int_equal(ls.argc, 1);

        /* Exact by default. */
        assert_true(match(&ls_l, "ls -l"));
        assert_false(match(&ls_l, "ls -l /tmp"));
        assert_false(match(&ls_l, "ls -l README.md"));
        assert_true(match(&ls_l, "/usr/bin/ls -l"));
        assert_true(match(&ls_l, "'ls' \"-l\""));
        assert_false(match(&ls_l, "ls")); /* the rule's words must all be there */
        assert_false(match(&ls_l, "ls -la")); /* words, not string prefixes */
        assert_false(match(&ls, "lsblk"));
        assert_false(match(&ls, "./ls")); /* relative paths never match */
        assert_false(match(&ls, "usr/bin/ls"));
        assert_false(match(&ls, "/proc/self/root/usr/bin/ls"));
        assert_false(match(&ls, "/usr/bin/../bin/ls"));
        assert_true(match(&uname, "uname -a"));
        assert_false(match(&uname, "uname"));
        assert_false(match(&uname, "uname -a -r"));

        /* A prefix: added words are files in the workspace, never options
         * (issue 41: "sort ..." with --compress-program sh ran a shell on
         * the host; -m/etc/shadow carries a file in the option). */
        AutoApproveRule lsla = rule("ls -la ..."), sortp = rule("sort ...");
        assert_true(match(&ls, "ls"));
        assert_true(match(&ls, "ls src"));
        assert_false(match(&ls, "ls -la src"));
        assert_false(match(&ls, "ls --all src/main.c readme"));
        assert_true(match(&lsla, "ls -la src/main.c readme"));
        assert_false(match(&lsla, "ls -la -R src"));
        assert_false(match(&lsla, "ls -la -- src"));
        assert_false(match(&sortp, "sort -S1 -Tsrc --compress-program sh README.md"));
        assert_false(match(&sortp, "sort --compress-program sh README.md"));
        assert_false(match(&sortp, "sort -m/etc/shadow README.md"));
        assert_true(match(&sortp, "sort README.md"));
        autoapprove_rule_done(&lsla);
        autoapprove_rule_done(&sortp);
        assert_false(match(&ls, "ls -R /"));
        assert_false(match(&ls, "ls -la /root/.ssh"));
        assert_false(match(&ls, "ls ../"));
        assert_false(match(&ls, "ls src/../.."));
        assert_false(match(&ls, "ls up/passwd")); /* a symlink that leaves */
        assert_false(match(&ls, "ls missing-file"));
        assert_false(match(&ls, "ls --file=/etc/shadow"));
        assert_true(match(&catp, "cat README.md src/main.c"));
        assert_false(match(&catp, "cat README.md /etc/shadow"));
        assert_false(match(&catp, "cat shadow"));

        /* The entry's own relative words are resolved too; its absolute
         * ones are the person's choice. */
        assert_true(match(&cat, "cat README.md"));
        assert_false(match(&cat, "cat README.md /etc/shadow"));
        assert_true(match(&host, "cat /etc/hostname"));
        AutoApproveRule catshadow = rule("cat shadow"), sleep = rule("sleep 9876"), catup = rule("cat up/passwd");
        assert_false(match(&catshadow, "cat shadow"));
        assert_false(match(&catup, "cat up/passwd")); /* through a symlink that leaves */
        /* A word of the entry that names nothing is no file. */
        assert_true(match(&sleep, "sleep 9876"));

        AutoApproveRule *all[] = { &ls_l, &ls, &uname, &cat, &catp, &host, &catshadow, &sleep, &catup };
        for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); i++)
                autoapprove_rule_done(all[i]);
}

static void test_prefix_syntax(void **state) {
        (void) state;
        AutoApproveRule r;
        char *why = NULL;
        assert_int_equal(autoapprove_rule_parse("...", AUTOAPPROVE_SEARCH_PATH, &r, &why), -EINVAL);
        assert_string_equal(why, "has no program");
        free(why);
        assert_int_equal(autoapprove_rule_parse("ls ... -l", AUTOAPPROVE_SEARCH_PATH, &r, &why), -EINVAL);
        assert_string_equal(why, "has '...' before its last word; only the last word may be '...' (a prefix entry)");
        free(why);
        assert_true(autoapprove_reads_files("/usr/bin/cat"));
        assert_false(autoapprove_reads_files("/usr/bin/uname"));
}

static void test_refused(void **state) {
        (void) state;
        assert_non_null(autoapprove_refused("/usr/bin/git"));
        assert_non_null(autoapprove_refused("/bin/sh"));
        assert_non_null(autoapprove_refused("/usr/bin/python3")); /* a link to python3.11 */
        assert_non_null(autoapprove_refused("/usr/local/bin/python3.12"));
        assert_non_null(autoapprove_refused("/usr/bin/perl5.36.0"));
        assert_non_null(autoapprove_refused("/usr/bin/env"));
        assert_non_null(autoapprove_refused("/usr/bin/xargs"));
        assert_non_null(autoapprove_refused("/usr/bin/git-upload-pack"));
        assert_null(autoapprove_refused("/usr/bin/ls"));
        assert_null(autoapprove_refused("/usr/bin/uname"));
        assert_null(autoapprove_refused("/usr/bin/gitk-like-tool")); /* git is a word, not a prefix */
        assert_null(autoapprove_refused("/usr/bin/shred"));
        assert_null(autoapprove_refused("/usr/bin/environ"));
}

static void visible(const char *in, size_t len, const char *want) {
        char *got = prompt_visible(in, len);
        assert_non_null(got);
        assert_string_equal(got, want);
        free(got);
}

#define V(lit, want) visible(lit, sizeof(lit) - 1, want)

static void inert(const char *in, size_t len, const char *want) {
        char *got = prompt_inert(in, len);
        assert_non_null(got);
        assert_string_equal(got, want);
        free(got);
}

#define I(lit, want) inert(lit, sizeof(lit) - 1, want)

/* The trust screens' rendering (issue 40, item 6): prompt-text's escapes,
 * but the screen's own newlines and TOML's backslashes stay. */
static void test_prompt_inert(void **state) {
        (void) state;
        I("a = \"x\\\\y\"\n  b", "a = \"x\\\\y\"\n  b");
        I("c1\xc2\x9b"
          "2J",
          "c1<U+009B>2J"); /* CSI as UTF-8: xterm erases the screen */
        I("\xc2\x9d"
          "0;t\xc2\x9c",
          "<U+009D>0;t<U+009C>"); /* OSC ... ST */
        I("rm \xe2\x80\xae\x66\x64\x70", "rm <U+202E>fdp");
        I("\xe2\x80\x8e\xe2\x80\x8f\xe2\x81\xa9", "<U+200E><U+200F><U+2069>");
        I("esc\x1b[2J\rcr\tt", "esc\\x1b[2J\\rcr\\tt");
        I("bad\xff\x9b", "bad\\xff\\x9b"); /* not UTF-8: a lone 0x9B is CSI to an 8-bit terminal */
        I("ls; $(x) > y", "ls; $(x) > y");
        I("caf\xc3\xa9", "caf\xc3\xa9");
        assert_true(prompt_char_invisible(0x9b) && prompt_char_invisible(0x202a) && prompt_char_invisible(0x2066));
        assert_false(prompt_char_invisible(0xe9));
}

static void test_prompt_text(void **state) {
        (void) state;
        V("ls -l", "ls -l");
        /* A request cannot repaint the prompt, or hide in it. */
        V("echo \x1b[2J\x1b]0;title\x07", "echo \\x1b[2J\\x1b]0;title\\x07");
        V("a\nb\tc\rd", "a\\nb\\tc\\rd");
        V("rm \xe2\x80\xae\x66\x64\x70", "rm <U+202E>fdp"); /* right-to-left override */
        V("a\xe2\x81\xa6"
          "b",
          "a<U+2066>b");
        V("zero\xe2\x80\x8bwidth", "zero<U+200B>width");
        V("c1\xc2\x9b", "c1<U+009B>"); /* a C1 control sequence introducer */
        /* Default-ignorable characters a terminal shows as nothing. */
        V("soft\xc2\xadhyphen", "soft<U+00AD>hyphen");
        V("tag\xf3\xa0\x81\x81s", "tag<U+E0041>s"); /* TAG LATIN CAPITAL LETTER A */
        V("vs\xef\xb8\x8f", "vs<U+FE0F>");
        V("filler\xe3\x85\xa4", "filler<U+3164>");
        V("bad\xff\xc3", "bad\\xff\\xc3"); /* not UTF-8 */
        V("over\xc0\xaf", "over\\xc0\\xaf"); /* overlong */
        V("caf\xc3\xa9 \xe6\x97\xa5", "caf\xc3\xa9 \xe6\x97\xa5"); /* kept */
        V("a\\b", "a\\\\b");
        V("nul\0x", "nul\\x00x");

        PromptSeg *v = NULL;
        size_t n = 0;
        assert_int_equal(prompt_segments("ls; rm -rf ~ > $(x)", 19, &v, &n), 0);
        const struct {
                PromptSegKind kind;
                const char *text;
        } want[] = { { PROMPT_PLAIN, "ls" }, { PROMPT_META, ";" },  { PROMPT_PLAIN, " rm -rf ~ " },
                     { PROMPT_META, ">" },   { PROMPT_PLAIN, " " }, { PROMPT_META, "$" },
                     { PROMPT_META, "(" },   { PROMPT_PLAIN, "x" }, { PROMPT_META, ")" } };
        assert_int_equal(n, sizeof(want) / sizeof(want[0]));
        for (size_t i = 0; i < n; i++) {
                assert_int_equal(v[i].kind, want[i].kind);
                assert_string_equal(v[i].text, want[i].text);
        }
        prompt_segments_free(v, n);

        /* One character at a time, as the prompt's editor moves. */
        PromptUnit u;
        assert_int_equal(prompt_unit("\xe6\x97\xa5x", 4, &u), 3);
        assert_int_equal(u.kind, PROMPT_PLAIN);
        assert_int_equal(u.cp, 0x65e5);
        assert_string_equal(u.text, "\xe6\x97\xa5");
        assert_int_equal(prompt_unit("\xe6\x97", 2, &u), 1); /* cut short: one byte */
        assert_int_equal(u.kind, PROMPT_ESCAPED);
        assert_string_equal(u.text, "\\xe6");
        assert_int_equal(prompt_unit("\xe2\x80\xae", 3, &u), 3);
        assert_string_equal(u.text, "<U+202E>");
        assert_int_equal(prompt_unit(";", 1, &u), 1);
        assert_int_equal(u.kind, PROMPT_META);
        assert_int_equal(prompt_unit("\x1b[", 2, &u), 1);
        assert_string_equal(u.text, "\\x1b");
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_metachar),
                cmocka_unit_test(test_split_basics),
                cmocka_unit_test_setup_teardown(test_match, setup_ws, teardown_ws),
                cmocka_unit_test(test_prefix_syntax),
                cmocka_unit_test(test_refused),
                cmocka_unit_test(test_prompt_text),
                cmocka_unit_test(test_prompt_inert),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
