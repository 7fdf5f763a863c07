/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "prompt-text.h"
#include "strbuf.h"

/* Length of the valid UTF-8 sequence at s (at most n bytes) and its code
 * point, or 0 when it is not one (overlong, surrogate, beyond U+10FFFF). */
size_t prompt_utf8_decode(const char *str, size_t n, uint32_t *ret) {
        const unsigned char *s = (const unsigned char *) str;
        if (s[0] < 0x80) {
                *ret = s[0];
                return 1;
        }
        size_t len = (s[0] & 0xe0) == 0xc0 ? 2 : (s[0] & 0xf0) == 0xe0 ? 3 : (s[0] & 0xf8) == 0xf0 ? 4 : 0;
        if (len == 0 || len > n)
                return 0;
        uint32_t cp = s[0] & (0x7f >> len);
        for (size_t i = 1; i < len; i++) {
                if ((s[i] & 0xc0) != 0x80)
                        return 0;
                cp = cp << 6 | (s[i] & 0x3f);
        }
        static const uint32_t min[] = { 0, 0, 0x80, 0x800, 0x10000 };
        if (cp < min[len] || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
                return 0;
        *ret = cp;
        return len;
}

/* Characters that change how text around them is shown, or show nothing. */
bool prompt_char_invisible(uint32_t cp) {
        /* C1 controls, bidi marks and overrides, zero-width characters, and
         * the default-ignorable ones a terminal shows as nothing or a blank:
         * the soft hyphen, the combining grapheme joiner, Hangul fillers,
         * Khmer inherent vowels, Mongolian selectors, variation selectors,
         * musical formatting, and tag characters (which can spell a whole
         * hidden sentence for a host AI tool to read). */
        return (cp >= 0x80 && cp <= 0x9f) || cp == 0x00ad || cp == 0x034f || cp == 0x061c || cp == 0x115f ||
               cp == 0x1160 || cp == 0x17b4 || cp == 0x17b5 || (cp >= 0x180b && cp <= 0x180f) ||
               (cp >= 0x200b && cp <= 0x200f) || (cp >= 0x2028 && cp <= 0x202e) || (cp >= 0x2060 && cp <= 0x206f) ||
               cp == 0x3164 || (cp >= 0xfe00 && cp <= 0xfe0f) || cp == 0xfeff || cp == 0xffa0 ||
               (cp >= 0xfff9 && cp <= 0xfffb) || (cp >= 0x1d173 && cp <= 0x1d17a) || (cp >= 0xe0000 && cp <= 0xe0fff);
}

typedef struct Builder {
        PromptSeg *v;
        size_t n, cap;
        bool oom;
} Builder;

static void add(Builder *b, PromptSegKind kind, const char *text, size_t len) {
        if (b->oom || len == 0)
                return;
        /* Plain text joins the plain segment before it. */
        if (kind == PROMPT_PLAIN && b->n > 0 && b->v[b->n - 1].kind == PROMPT_PLAIN) {
                PromptSeg *last = &b->v[b->n - 1];
                size_t old = strlen(last->text);
                char *t = realloc(last->text, old + len + 1);
                if (!t) {
                        b->oom = true;
                        return;
                }
                memcpy(t + old, text, len);
                t[old + len] = '\0';
                last->text = t;
                return;
        }
        if (b->n == b->cap) {
                size_t cap = b->cap ? b->cap * 2 : 8;
                PromptSeg *nv = realloc(b->v, cap * sizeof(PromptSeg));
                if (!nv) {
                        b->oom = true;
                        return;
                }
                b->v = nv;
                b->cap = cap;
        }
        char *t = malloc(len + 1); /* text may not end in a NUL */
        if (!t) {
                b->oom = true;
                return;
        }
        memcpy(t, text, len);
        t[len] = '\0';
        b->v[b->n++] = (PromptSeg){ kind, t };
}

size_t prompt_unit(const char *s, size_t len, PromptUnit *ret) {
        const unsigned char *p = (const unsigned char *) s;
        unsigned char c = p[0];
        *ret = (PromptUnit){ .kind = PROMPT_PLAIN, .cp = c };
        if (c == '\n' || c == '\t' || c == '\r') {
                ret->kind = PROMPT_ESCAPED;
                snprintf(ret->text, sizeof(ret->text), "%s", c == '\n' ? "\\n" : c == '\t' ? "\\t" : "\\r");
                return 1;
        }
        if (c < 0x20 || c == 0x7f) {
                ret->kind = PROMPT_ESCAPED;
                snprintf(ret->text, sizeof(ret->text), "\\x%02x", c);
                return 1;
        }
        if (c == '\\') {
                ret->kind = PROMPT_META;
                snprintf(ret->text, sizeof(ret->text), "\\\\");
                return 1;
        }
        if (c < 0x80) {
                if (strchr(";|&$()`><", c))
                        ret->kind = PROMPT_META;
                ret->text[0] = (char) c;
                return 1;
        }
        uint32_t cp = 0;
        size_t n = prompt_utf8_decode(s, len, &cp);
        if (n == 0) {
                ret->kind = PROMPT_ESCAPED;
                snprintf(ret->text, sizeof(ret->text), "\\x%02x", c);
                return 1;
        }
        ret->cp = cp;
        if (prompt_char_invisible(cp)) {
                ret->kind = PROMPT_ESCAPED;
                snprintf(ret->text, sizeof(ret->text), "<U+%04X>", (unsigned) cp);
        } else
                memcpy(ret->text, s, n);
        return n;
}

int prompt_segments(const char *s, size_t len, PromptSeg **ret, size_t *ret_n) {
        Builder b = {};
        for (size_t i = 0; i < len && !b.oom;) {
                PromptUnit u;
                i += prompt_unit(s + i, len - i, &u);
                add(&b, u.kind, u.text, strlen(u.text));
        }
        if (b.oom) {
                prompt_segments_free(b.v, b.n);
                return -ENOMEM;
        }
        *ret = b.v;
        *ret_n = b.n;
        return 0;
}

void prompt_segments_free(PromptSeg *v, size_t n) {
        for (size_t i = 0; i < n; i++)
                free(v[i].text);
        free(v);
}

char *prompt_visible(const char *s, size_t len) {
        PromptSeg *v = NULL;
        size_t n = 0;
        if (prompt_segments(s, len, &v, &n) < 0)
                return NULL;
        size_t total = 1;
        for (size_t i = 0; i < n; i++)
                total += strlen(v[i].text);
        char *out = malloc(total);
        if (out) {
                out[0] = '\0';
                for (size_t i = 0; i < n; i++)
                        strcat(out, v[i].text);
        }
        prompt_segments_free(v, n);
        return out;
}

char *prompt_inert(const char *s, size_t len) {
        StrBuf b = STRBUF_INIT;
        for (size_t i = 0; i < len;) {
                PromptUnit u;
                size_t n = s[i] == '\n' ? 1 : prompt_unit(s + i, len - i, &u);
                if (s[i] != '\n' && u.kind == PROMPT_ESCAPED && s[i] != '\\')
                        strbuf_puts(&b, u.text);
                else
                        strbuf_putn(&b, s + i, n);
                i += n;
        }
        return strbuf_steal(&b);
}
