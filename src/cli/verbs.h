/* SPDX-License-Identifier: MIT */
#pragma once

#include <stdbool.h>

/* Exit statuses of the lazaret CLI (see lazaret(1), EXIT STATUS). Commands
 * run in the sandbox pass their own status through; Lazaret's own failures
 * follow Podman's habit (architecture decision 1). */
enum {
        EXIT_PROBLEMS = 1, /* doctor: a required check failed */
        EXIT_USAGE = 64, /* bad command line */
        EXIT_CONFIG = 65, /* configuration invalid */
        EXIT_LAZARET = 125, /* Lazaret itself failed */
        EXIT_CANNOT_RUN = 126,
        EXIT_NOT_FOUND = 127,
};

/* Options every verb accepts anywhere before "--". */
/* lazaret up -> each agent's lazaret run: the descriptor that gets a
 * byte once the agent's session is open. */
#define READY_FD_ENV "LAZARET_READY_FD"

typedef struct Globals {
        const char *config_path; /* --config FILE, or NULL */
        const char *workspace; /* --workspace DIR, or NULL for the current directory */
        const char *agent; /* --agent NAME: one of several agents on this workspace and profile, or NULL */
        const char *verb; /* the verb typed ("run", "report"...), for messages; NULL: none */
} Globals;

typedef struct Verb {
        const char *name;
        int (*run)(int argc, char **argv, const Globals *g); /* argv[0] is the verb */
        const char *summary;
} Verb;

int verb_audit(int argc, char **argv, const Globals *g);
int verb_config(int argc, char **argv, const Globals *g);
int verb_doctor(int argc, char **argv, const Globals *g);
int verb_image(int argc, char **argv, const Globals *g);
int verb_init(int argc, char **argv, const Globals *g);
int verb_run(int argc, char **argv, const Globals *g);
int verb_diff(int argc, char **argv, const Globals *g);
int verb_events(int argc, char **argv, const Globals *g);
int verb_report(int argc, char **argv, const Globals *g);
int verb_reset(int argc, char **argv, const Globals *g);
int verb_trust(int argc, char **argv, const Globals *g);
int verb_status(int argc, char **argv, const Globals *g);
int verb_stop(int argc, char **argv, const Globals *g);
int verb_up(int argc, char **argv, const Globals *g);
int verb_attach(int argc, char **argv, const Globals *g);
int verb_down(int argc, char **argv, const Globals *g);
int verb_kube(int argc, char **argv, const Globals *g);
