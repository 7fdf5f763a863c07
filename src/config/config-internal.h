/* SPDX-License-Identifier: MIT */
#pragma once

/* What config.c (loading, merging, the top-level sections, the public
 * calls) and config-profile.c (a profile's sections: network, image,
 * volumes, env, command) share: the Validator and its helpers
 * (config-node.c, config-validator.c). Nothing else includes it. The
 * files call downwards only: config.c -> config-profile.c ->
 * config-validator.c -> config-authority.c -> config-node.c. */
#include <arpa/inet.h>
#include <errno.h>
#include <openssl/evp.h>
#include <pwd.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cidr.h"
#include "netpolicy-digest.h"
#include "config.h"
#include "expand.h"
#include "fd-util.h"
#include "fileio.h"
#include "path-util.h"
#include "path-pattern.h"
#include "persist.h"
#include "strbuf.h"
#include "string-util.h"

typedef struct NetWhere {
        const char *file;
        TomlPos pos;
        const char *list; /* "network.default_allow", "profiles.x.allow_egress", ... */
        size_t index;
} NetWhere;

typedef struct Validator {
        Config *c;
        ConfigDiags *d;
        bool data_root_ok;
        /* Network policy input: [network] entries first (n_net_global), then
         * the profile being validated. */
        NetPolicyEntry *net;
        NetWhere *net_where;
        size_t n_net, n_net_global, cap_net;
        NetWhere res_where[NETPOLICY_RESOLVERS_MAX];
        bool net_bad; /* some network input was invalid: no policy compiled */
        bool image_optional; /* ConfigLoadOptions.image_optional */
} Validator;

/* ---- the validator's helpers ------------------------------------------- */

/* config-node.c: an error or a warning at file:pos, for the user. */
_printf_(5, 6) void config_diag_add(ConfigDiags *d, const char *file, TomlPos pos, bool warning, const char *fmt, ...);
#define ERR(d, file, pos, ...)  config_diag_add((d), (file), (pos), false, __VA_ARGS__)
#define WARN(d, file, pos, ...) config_diag_add((d), (file), (pos), true, __VA_ARGS__)
#define NODE_ERR(v, n, ...)     ERR((v)->d, (n)->src->path, (n)->value->pos, __VA_ARGS__)
#define KEY_ERR(v, n, ...)      ERR((v)->d, (n)->src->path, (n)->key_pos, __VA_ARGS__)

/* An absolute path with "." segments, doubled and trailing slashes dropped
 * ("/" for none); NULL on OOM. */
char *config_path_squash(const char *p);
bool config_env_name_valid(const char *s);

/* config-validator.c */
ConfigWhere config_where_of(const ConfigNode *n);
void config_check_unknown(Validator *v, const ConfigNode *n, const char *what, const char *parent);
bool config_want_type(Validator *v, const ConfigNode *n, const char *name, TomlType t);
const ConfigNode *config_want_child(Validator *v, const ConfigNode *t, const char *key, const char *name,
                                    const char *file, TomlPos pos);
bool config_string_ok(Validator *v, const ConfigNode *n, const char *name);
char **config_string_list_max(Validator *v, const ConfigNode *n, const char *name, size_t max, size_t *ret_n, bool *ok);
int config_host_path_given(Validator *v, const char *file, TomlPos pos, const char *name, const char *raw,
                           const ExpandContext *ctx, char **ret, char **ret_given);
int config_host_path(Validator *v, const char *file, TomlPos pos, const char *name, const char *raw,
                     const ExpandContext *ctx, char **ret);
char **config_string_list(Validator *v, const ConfigNode *n, const char *name, size_t *ret_n, bool *ok);
uint64_t config_bounded_int(Validator *v, const ConfigNode *n, const char *name, const char *unit, uint64_t min,
                            uint64_t max, uint64_t def, const char *what);

/* ---- config-profile.c ---------------------------------------------------- */

int config_validate_network(Validator *v, const ConfigNode *t, const char *top_file);
int config_validate_profile(Validator *v, const ConfigNode *t);
