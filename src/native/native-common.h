/* SPDX-License-Identifier: MIT */
#pragma once

/* lazaret-native's parts (native-main.c describes the program and its
 * modes): what they share. native-common.c holds what every mode's
 * processes use (one error line and exit, the error pipe, signals passed
 * on, waiting, the temp directory, the command's environment and its
 * confinement); native-full.c the FULL and HOLD sandbox (A and B);
 * native-fs-only.c FS-ONLY; native-join.c JOIN; native-main.c P, the
 * options and the choice of mode. */

#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "landlock.h"
#include "macro.h"

#ifndef CLOSE_RANGE_CLOEXEC
#define CLOSE_RANGE_CLOEXEC (1U << 2)
#endif

#define EXIT_NATIVE 125
#define ARGS_MAX    256 /* --ro, --mask and --setenv each */
/* --env-fd: what a caller may pass, in all and in entries. */
#define ENV_FD_BYTES_MAX   (1024 * 1024)
#define ENV_FD_ENTRIES_MAX 4096
#define NEW_ROOT           "/tmp/.lazaret-root" /* on a tmpfs of the new mount namespace */
#define HOME_DIR           "/home/sandbox"
#define ENTRIES_MAX        4096 /* FS-ONLY: entries granted one by one around the masks */
#define TMP_TEMPLATE       "/tmp/lazaret-native.XXXXXX"

/* The host's system directories, read-only in every mode; the devices of
 * /dev a sandbox gets. */
extern const char *const system_dirs[6];
extern const char *const devices[6];

typedef struct Spec {
        char *workspace; /* resolved */
        const char *cwd; /* FS-ONLY: --cwd, below the workspace */
        char *ro[ARGS_MAX];
        char *ro_id[ARGS_MAX]; /* --ro-pinned: the identity ro[i] must have (fd_identity), or NULL */
        size_t n_ro;
        /* --ro-bind SRC:DST: SRC (resolved) read-only at DST. */
        char *ro_src[ARGS_MAX];
        char *ro_src_id[ARGS_MAX]; /* --ro-bind-pinned: the identity ro_src[i] must have, or NULL */
        const char *ro_dst[ARGS_MAX];
        size_t n_ro_bind;
        /* --bind SRC:DST: SRC (resolved) read-write at DST. */
        char *rw_src[ARGS_MAX];
        char *rw_src_id[ARGS_MAX]; /* --bind-pinned */
        const char *rw_dst[ARGS_MAX];
        size_t n_rw_bind;
        /* --persist DIR:DST: DST kept in DIR (native-persist.c). */
        char *persist_dir[ARGS_MAX];
        const char *persist_dst[ARGS_MAX];
        size_t n_persist;
        unsigned long long tmp_size; /* of /tmp and the home each; 0: the kernel's default */
        char *mask[ARGS_MAX];
        size_t n_mask;
        char *setenv[ARGS_MAX];
        size_t n_setenv;
        /* --join: the entries read from --env-fd, in one buffer. */
        char *fd_env_buf;
        char **fd_env;
        size_t n_fd_env;
        unsigned long long shm_size;
        bool hold;
        char **argv;
} Spec;

/* native-common.c */
extern int err_fd;
extern const char *tmp_dir;
extern int tmp_fd;
_noreturn_ _printf_(1, 2) void die(const char *fmt, ...);
size_t read_error(int fd, char *msg, size_t size);
void loopback_up(void);
void write_file(const char *path, const char *s);
void die_with_parent(int alive);
extern volatile sig_atomic_t forward_to;
void forward_signals(pid_t pid, bool interrupts);
int status_of(int st);
int wait_for(pid_t pid);
extern char **envp;
void use_env_path(void);
void build_env(const Spec *s, const char *home, const char *tmpdir);
void close_inherited(void);
void add_rule(LandlockRules *r, const char *path, LandlockGrant g);
extern const char *rw_paths[ARGS_MAX];
extern size_t n_rw_paths;
extern unsigned long long nproc_limit;
void apply_nproc(void);
extern bool loopback;
extern bool share_net;
_noreturn_ void exec_confined(char *const *argv);
_noreturn_ void run_command(const Spec *s);
void change_to(const char *root, const char *cwd);
void remove_tmp_dir(void);

/* native-full.c */
_noreturn_ void setup_main(const Spec *s, int alive, int ready, uid_t uid, gid_t gid);

/* native-persist.c: the persistent directories' layers, planned (and a
 * new upper layer made) while the host's paths are in sight, mounted into
 * the new root after its binds. */
void persist_plan(const Spec *s);
void persist_mount(void);

/* native-fs-only.c */
int run_fs_only(const Spec *s, int abi);

/* native-join.c */
bool cwd_is_valid(const char *p);
void read_env_fd(Spec *s, int fd);
_noreturn_ void join_main(const Spec *s, pid_t pid, const char *cwd);
