/* SPDX-License-Identifier: MIT */
#include <dirent.h>
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <linux/rtnetlink.h>
#include <stdio.h>
#include <sys/socket.h>

#include "fd-util.h"
#include "fileio.h"
#include "netpolicy.h"
#include "path-util.h"
#include "presets.h"
#include "rtnl.h"
#include "string-util.h"
#include "starter.h"
#include "strbuf.h"

static const char starter_head[] = "# Lazaret configuration; see lazaret.toml(5). Written by 'lazaret init'.\n"
                                   "#\n"
                                   "# Files are read in this order, later ones winning: this file,\n"
                                   "# <workspace>/lazaret.toml, then the file given with --config. Tables merge\n"
                                   "# key by key; any other value (arrays too) replaces the earlier one whole.\n"
                                   "# 'lazaret config show' prints the result and where each value came from.\n"
                                   "\n"
                                   "[storage]\n"
                                   "# Where profiles ({profile_dir} = data_root/NAME) and per-workspace domains\n"
                                   "# ({domain_dir} = data_root/domains/HASH) keep their state.\n"
                                   "data_root = \"~/.local/share/lazaret\"\n"
                                   "\n";

static const char starter_escalation[] = "[escalation]\n"
                                         "# The one door back to the host: the agent asks, you approve in a prompt.\n"
                                         "enabled = true\n";

static const char starter_tail[] =
        "# Commands that run without a prompt when a request is exactly these\n"
        "# words; an entry ending in ' ...' also takes more words, each an option\n"
        "# or a file in the workspace. Never git, shells or anything that runs\n"
        "# other programs (those are refused here).\n"
        "# auto_approve = [\"uname -a\", \"df -h\"]\n"
        "\n"
        "# One table per agent. Names: 2-32 characters of a-z, 0-9, '_' and '-'.\n"
        "[profiles.shell]\n"
        "# Fully qualified image; pin a digest (IMAGE@sha256:...) when it comes from a\n"
        "# registry. This one is built here, offline: lazaret image build debian\n"
        "image = \"localhost/lazaret/debian:bookworm\"\n"
        "# The command a bare 'lazaret run' starts (an agent CLI, or a shell):\n"
        "command = [\"/bin/bash\", \"-l\"]\n"
        "# Directories kept across restarts, per profile and workspace:\n"
        "# persistent_dirs = [\"/usr\", \"/var\", \"/etc\", \"/root\"]\n"
        "# Ceilings: processes and threads at once, MiB of memory held (the sandbox\n"
        "# stops there), CPUs (0: all; it always runs at nice 10); 'lazaret status'\n"
        "# shows what enforces each:\n"
        "pids_limit = 1024\n"
        "memory_limit = 8192\n"
        "cpu_limit = 0\n"
        "# MiB it may write to its own root file system (ENOSPC past it):\n"
        "disk_limit = 16384\n"
        "# Extra destinations for this profile only:\n"
        "# allow_egress = [\"198.51.100.0/24\"]\n"
        "# Only variables named here enter the sandbox; \"env:VAR\" copies the host's:\n"
        "# env = { EDITOR = \"vi\", GITHUB_TOKEN = \"env:GITHUB_TOKEN\" }\n"
        "# Host paths may use ~, {profile_dir}, {domain_dir}, {workspace_dir}, ...:\n"
        "# volumes = [{ host = \"{profile_dir}/home\", container = \"/root\", mode = \"z\" }]\n";

/* The first nameserver of resolv.conf that a sandbox behind Podman's bridge
 * can reach (IPv4, not loopback, not link-local); "" when there is none. */
static void host_resolver(char *buf, size_t size) {
        buf[0] = '\0';
        _cleanup_fclose_ FILE *f = fopen("/etc/resolv.conf", "re");
        char line[512];
        while (f && fgets(line, sizeof(line), f)) {
                char *v = (char *) startswith(line, "nameserver");
                if (!v || (*v != ' ' && *v != '\t'))
                        continue;
                v += strspn(v, " \t");
                v[strcspn(v, " \t\r\n%")] = '\0';
                NetAddr a;
                if (netaddr_parse(v, &a) < 0)
                        continue;
                /* IPv4 only: the bridge has no IPv6. */
                if (a.family != AF_INET || a.addr[0] == 127 || (a.addr[0] == 169 && a.addr[1] == 254))
                        continue;
                snprintf(buf, size, "%s", v);
                return;
        }
}

/* Does the host route global IPv6 anywhere? A route lookup; nothing is
 * sent. */
static bool host_has_ipv6_uplink(void) {
        Rtnl nl;
        NetAddr dst;
        RtnlRoute rt;
        if (netaddr_parse("2001:db8::1", &dst) < 0 || rtnl_open(&nl) < 0)
                return false;
        bool up = rtnl_route_get(&nl, &dst, &rt) == 0 && rt.type == RTN_UNICAST;
        rtnl_close(&nl);
        return up;
}

/* Whether dir holds a file (at any depth) whose name ends in one of the
 * certificate suffixes. */
static bool dir_has_certs(const char *dir, int depth) {
        DIR *d = depth <= 4 ? opendir(dir) : NULL;
        bool found = false;
        for (struct dirent *e; d && !found && (e = readdir(d));) {
                size_t n = strlen(e->d_name);
                if (e->d_name[0] == '.')
                        continue;
                if (n > 4 && (streq(e->d_name + n - 4, ".crt") || streq(e->d_name + n - 4, ".pem") ||
                              streq(e->d_name + n - 4, ".cer")))
                        found = true;
                else if (e->d_type == DT_DIR) {
                        _cleanup_free_ char *sub = path_join(dir, e->d_name);
                        found = sub && dir_has_certs(sub, depth + 1);
                }
        }
        if (d)
                closedir(d);
        return found;
}

void starter_probe_host(StarterHost *ret) {
        StarterHost h = { .rootful = geteuid() == 0 };
        h.local_cas = dir_has_certs("/usr/local/share/ca-certificates", 0) ||
                      dir_has_certs("/etc/pki/ca-trust/source/anchors", 0);
        /* Rootful Podman's default bridge has no IPv6; rootless slirp4netns
         * has it when the host has. */
        h.ipv6 = !h.rootful && host_has_ipv6_uplink();
        if (h.rootful)
                host_resolver(h.resolver, sizeof(h.resolver));
        *ret = h;
}

static void write_network(StrBuf *b, const StarterHost *h) {
        const char *resolver = h->rootful ? h->resolver : "10.0.2.3";
        strbuf_puts(b, "[network]\n"
                       "# Destinations every sandbox may reach (CIDR prefixes, IPv4 and IPv6).\n"
                       "# The longest matching prefix of the two lists decides; 0.0.0.0/0 and ::/0\n"
                       "# set what the rest of each family does.\n");
        strbuf_printf(b, "default_allow = [\"0.0.0.0/0\"%s", h->ipv6 ? ", \"::/0\"" : "");
        if (*resolver)
                strbuf_printf(b, ", \"%s/32\"", resolver);
        strbuf_puts(b, "]\n"
                       "# Destinations no sandbox may reach: private, shared, loopback, link-local\n"
                       "# and cloud metadata ranges. (The host's own addresses are always denied.)\n"
                       "default_deny = [\n"
                       "  \"0.0.0.0/8\", \"10.0.0.0/8\", \"100.64.0.0/10\", \"127.0.0.0/8\",\n"
                       "  \"169.254.0.0/16\", \"172.16.0.0/12\", \"192.168.0.0/16\",\n");
        if (h->ipv6)
                strbuf_puts(b, "  \"::1/128\", \"fc00::/7\", \"fe80::/10\", \"fd00:ec2::254/128\",\n");
        strbuf_puts(b, "]\n");
        if (h->ipv6)
                strbuf_puts(b, "# \"disabled\" switches IPv6 off in the sandbox's network namespace.\n"
                               "ipv6 = \"enabled\"\n");
        else if (h->rootful)
                strbuf_puts(b, "# Rootful Podman's default bridge carries no IPv6.\n"
                               "ipv6 = \"disabled\"\n");
        else
                strbuf_puts(b, "# This host has no IPv6 route to the internet (checked by 'lazaret init').\n"
                               "ipv6 = \"disabled\"\n");
        if (!h->rootful)
                strbuf_puts(b, "# DNS servers the sandbox uses; each must be allowed above. 10.0.2.3 is\n"
                               "# rootless Podman's slirp4netns forwarder, which asks the host's resolvers.\n"
                               "resolvers = [\"10.0.2.3\"]\n");
        else if (*resolver)
                strbuf_printf(b,
                              "# DNS servers the sandbox uses; each must be allowed above. This is the\n"
                              "# host's (/etc/resolv.conf), reached through Podman's bridge.\n"
                              "resolvers = [\"%s\"]\n",
                              resolver);
        else
                strbuf_puts(b, "# /etc/resolv.conf names no resolver a sandbox behind Podman's bridge can\n"
                               "# reach (a loopback one, such as systemd-resolved's, is not): add one\n"
                               "# here and allow it above, or the sandbox resolves no names.\n"
                               "resolvers = []\n");
        strbuf_puts(b, "# Checked before the agent starts, besides every denied prefix: these must\n"
                       "# answer a TCP connect (ADDRESS:PORT), and each resolver this name.\n"
                       "# probe_targets = [\"198.51.100.7:443\"]\n"
                       "# probe_dns_name = \"example.com\"\n"
                       "\n");
}

/* ca_certificates: on where the host trusts authorities of its own. */
static void write_ca(StrBuf *b, const StarterHost *h) {
        if (h->local_cas)
                strbuf_puts(b, "# This host trusts certificate authorities of its own (in\n"
                               "# /usr/local/share/ca-certificates or /etc/pki/ca-trust/source/anchors),\n"
                               "# which the image does not: the sandbox gets the host's trust store.\n"
                               "ca_certificates = \"host\"\n");
        else
                strbuf_puts(b, "# Behind a proxy that inspects TLS, trust what the host trusts:\n"
                               "# ca_certificates = \"host\"\n");
}

int starter_config(const StarterHost *h, char **ret) {
        StrBuf b = STRBUF_INIT;
        const char *rt = getenv("XDG_RUNTIME_DIR");

        strbuf_puts(&b, starter_head);
        write_network(&b, h);
        strbuf_puts(&b, starter_escalation);
        strbuf_puts(&b, "# A private directory (created 0700) for the escalation sockets.\n");
        if (rt && path_is_absolute(rt) && !strpbrk(rt, "\"\\{}"))
                strbuf_printf(&b, "socket_dir = \"%s/lazaret\"\n", rt);
        else
                strbuf_printf(&b, "socket_dir = \"/tmp/lazaret-%u\"\n", (unsigned) getuid());
        strbuf_puts(&b, starter_tail);
        write_ca(&b, h);
        if (!h->sandbox_network_ok)
                strbuf_puts(&b, "# runsc's own network stack (\"sandbox\") cannot start on this host (see\n"
                                "# 'lazaret doctor', check runsc-network); use the kernel's stack instead:\n"
                                "runsc_network = \"host\"\n");
        else
                strbuf_puts(&b, "# gVisor's own network stack carries the agent's traffic (the default);\n"
                                "# \"host\" would hand it to the kernel's stack in the sidecar's namespace.\n"
                                "runsc_network = \"sandbox\"\n");
        char *s = strbuf_steal(&b);
        if (!s)
                return -ENOMEM;
        *ret = s;
        return 0;
}

/* What each key of a preset gives, for the comments above it. */
static const char *preset_key_note(const char *key, const Preset *ps) {
        static const struct {
                const char *key, *note;
        } notes[] = {
                { "command", "installs the agent on its first run (it stays), then starts it" },
                { "persistent_dirs", "kept across restarts, per workspace: the installed agent" },
                { "env", "passed in from your environment when set (never written here)" },
                { "volumes", "the agent's login and settings, in {profile_dir}, for every workspace" },
                { "inherit_default_allow",
                  "names only: [network] default_allow does not reach it, only its own allow_egress (none here)" },
                { "allow_domains", "the only names it reaches, through the broker (no other network)" },
        };
        if (streq(key, "image"))
                return streq(ps->image_flavour, "node") ? "the image, built here once (lazaret image build node)"
                                                        : "the image, built here once (lazaret image build debian)";
        for (size_t i = 0; i < ELEMENTSOF(notes); i++)
                if (streq(notes[i].key, key))
                        return notes[i].note;
        return NULL;
}

int starter_agent_profile(const char *name, const Preset *ps, const StarterHost *h, char **ret) {
        StrBuf b = STRBUF_INIT;
        strbuf_printf(&b,
                      "\n# %s, from the built-in preset \"%s\".\n"
                      "# What the preset gives is below, as comments; a key written in this table\n"
                      "# replaces the preset's ('lazaret config show' prints each value and where\n"
                      "# it came from).\n"
                      "[profiles.%s]\n"
                      "preset = \"%s\"\n",
                      ps->agent, ps->name, name, ps->name);
        for (const char *line = ps->body; *line;) {
                size_t n = strcspn(line, "\n");
                size_t k = strcspn(line, " =");
                _cleanup_free_ char *key = strndup(line, k);
                const char *note = key ? preset_key_note(key, ps) : NULL;
                if (note)
                        strbuf_printf(&b, "# %s:\n", note);
                strbuf_printf(&b, "#   %.*s\n", (int) n, line);
                line += n;
                if (*line == '\n')
                        line++;
        }
        write_ca(&b, h);
        char *s = strbuf_steal(&b);
        if (!s)
                return -ENOMEM;
        *ret = s;
        return 0;
}
