/* SPDX-License-Identifier: MIT */
/* Replays fuzzer inputs outside libFuzzer, so the committed corpus and every
 * crash reproducer run in the normal test suite (under ASan in make check).
 * Arguments are files or directories (read one level deep). */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>

#include "fileio.h"
#include "macro.h"
#include "path-util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define REPLAY_MAX (4u * 1024u * 1024u)

static int replay_file(const char *path) {
        char *buf = NULL;
        size_t len = 0;
        int r = read_file_capped(path, REPLAY_MAX, &buf, &len);
        if (r < 0) {
                fprintf(stderr, "fuzz-replay: %s: cannot read (errno %d)\n", path, -r);
                return -1;
        }
        LLVMFuzzerTestOneInput((const uint8_t *) buf, len);
        free(buf);
        return 1;
}

int main(int argc, char **argv) {
        unsigned n = 0;
        for (int i = 1; i < argc; i++) {
                struct stat st;
                if (stat(argv[i], &st) < 0) {
                        perror(argv[i]);
                        return 1;
                }
                if (!S_ISDIR(st.st_mode)) {
                        if (replay_file(argv[i]) < 0)
                                return 1;
                        n++;
                        continue;
                }
                DIR *d = opendir(argv[i]);
                if (!d) {
                        perror(argv[i]);
                        return 1;
                }
                struct dirent *de;
                while ((de = readdir(d))) {
                        if (de->d_name[0] == '.')
                                continue;
                        char *p = path_join(argv[i], de->d_name);
                        if (!p || replay_file(p) < 0) {
                                free(p);
                                closedir(d);
                                return 1;
                        }
                        free(p);
                        n++;
                }
                closedir(d);
        }
        if (n == 0) {
                fprintf(stderr, "fuzz-replay: no inputs found; a corpus that cannot run proves nothing\n");
                return 1;
        }
        printf("fuzz-replay: %u inputs replayed\n", n);
        return 0;
}
