# SPDX-License-Identifier: MIT
"""Bad configurations: each gets exactly the expected error lines
(FILE:LINE:COL: message), exit status 65, and nothing is created.

In a case's text, the marker « stands where the error must point; it is
removed before the file is written, and the expected line and column are
computed from it (columns count code points, like the parser)."""
import os

import pytest

MARK = "«"

STORAGE = '[storage]\ndata_root = "{root}/data"\n'
NETWORK = '[network]\ndefault_allow = ["0.0.0.0/0", "::/0"]\ndefault_deny = ["10.0.0.0/8"]\n'
ESCALATION = '[escalation]\nenabled = true\nsocket_dir = "{root}/sock"\n'
PROFILE = '[profiles.shell]\nimage = "localhost/lazaret/test:1"\n'
BASE = STORAGE + NETWORK + ESCALATION + PROFILE


def base(storage=STORAGE, network=NETWORK, escalation=ESCALATION, profile=PROFILE, extra=""):
    return storage + network + escalation + profile + extra


def locate(text):
    """Return (text without markers, [(line, col), ...] in order)."""
    out, marks, line, col = [], [], 1, 1
    for ch in text:
        if ch == MARK:
            marks.append((line, col))
            continue
        out.append(ch)
        if ch == "\n":
            line, col = line + 1, 1
        else:
            col += 1
    return "".join(out), marks


CASES = [
    # --- TOML syntax: the parser's message, at the parser's position
    ("toml-missing-equals", base(extra='env «"x"\n'), ["expected '=' after key"]),
    ("toml-duplicate-key", base(extra='«image = "localhost/b:1"\n'), ["duplicate key 'image'"]),
    ("toml-duplicate-table", base(extra='[«storage]\n'), ["duplicate table 'storage'"]),
    ("toml-unterminated-string", base(extra='env = { A = «"abc }\n'), ["unterminated string"]),
    ("toml-control-character", base(extra='env = { A = "a«\x01" }\n'),
     ["control character U+0001 is not allowed in a string"]),
    ("toml-bad-date", base(extra='when = «1979-02-30\n'), ["invalid date '1979-02-30': day out of range"]),
    ("toml-integer-overflow", base(extra='n = «99999999999999999999\n'),
     ["integer '99999999999999999999' out of range"]),
    # [profiles.shell] is two levels already: the 15th bracket is the 17th level.
    ("toml-too-deep", base(extra='a = ' + '[' * 14 + '«[' + ']' * 15 + '\n'), ["nesting too deep (limit 16)"]),
    ("toml-string-too-long", base(extra='a = «"' + 'x' * 4097 + '"\n'), ["string longer than 4096 bytes"]),
    # --- the schema: unknown keys, with their position
    ("unknown-section", base(extra='[«stroage]\nx = 1\n'),
     ["unknown key 'stroage' in the top level (known: storage, network, escalation, profiles, runtime, workspace, default_profile)"]),
    ("unknown-storage-key", base(storage='[storage]\ndata_root = "{root}/data"\n«dataroot = "x"\n'),
     ["unknown key 'dataroot' in [storage] (known: data_root)"]),
    ("unknown-network-key", base(network=NETWORK + '«default_allows = []\n'),
     ["unknown key 'default_allows' in [network] (known: default_allow, default_deny, ipv6, resolvers, "
      "probe_targets, probe_dns_name, default_domains, probe_domains, broker_connections)"]),
    ("unknown-escalation-key", base(escalation=ESCALATION + '«autoapprove = []\n'),
     ["unknown key 'autoapprove' in [escalation] (known: enabled, socket_dir, auto_approve, output_limit, time_limit)"]),
    ("unknown-profile-key", base(extra='«images = "x"\n'),
     ["unknown key 'images' in [profiles.shell] (known: preset, image, command, runsc_network, backend, workspace_mode, persistent_dirs, pids_limit, memory_limit, cpu_limit, disk_limit, allow_egress, inherit_default_allow, allow_domains, check_server_name, status_line, clipboard, ca_certificates, env, volumes)"]),
    ("unknown-volume-key",
     base(extra='volumes = [{ host = "/tmp", container = "/x", «readonly = true }]\n'),
     ["unknown key 'readonly' in profiles.shell.volumes[0] (known: host, container, mode)"]),
    ("unknown-key-escaped", base(extra='«"a\\u001b[31m" = 1\n'),
     ["unknown key 'a\\x1b[31m' in [profiles.shell] (known: preset, image, command, runsc_network, backend, workspace_mode, persistent_dirs, pids_limit, memory_limit, cpu_limit, disk_limit, allow_egress, inherit_default_allow, allow_domains, check_server_name, status_line, clipboard, ca_certificates, env, volumes)"]),

    ("bad-path-pattern", base(extra='[workspace]\nprotect = ["ok", «"a/../b"]\n'),
     ["workspace.protect[1]: 'a/../b' is not a path pattern: a '.' or '..' component"]),
    ("unknown-workspace-key", base(extra='[workspace]\n«protected = []\n'),
     ["unknown key 'protected' in [workspace] (known: protect, mask)"]),
    ("key-with-nul", base(extra='«"image\\u0000x" = "localhost/b:1"\n'),
     ["key 'image\\x00x' contains a NUL character"]),

    # --- required sections and keys
    ("missing-storage", "«" + NETWORK + ESCALATION + PROFILE,
     ["[storage] section is required (it sets data_root)"]),
    ("missing-network", "«" + STORAGE + ESCALATION + PROFILE,
     ["[network] section is required (it sets default_allow and default_deny)"]),
    ("missing-escalation", "«" + STORAGE + NETWORK + PROFILE,
     ["[escalation] section is required (it sets enabled and socket_dir)"]),
    ("missing-data-root", base(storage='[«storage]\n'), ["storage.data_root is required"]),
    ("missing-default-deny", base(network='[«network]\ndefault_allow = []\n'),
     ["network.default_deny is required"]),
    ("missing-enabled", base(escalation='[«escalation]\nsocket_dir = "/tmp/x"\n'),
     ["escalation.enabled is required"]),
    ("missing-socket-dir", base(escalation='[«escalation]\nenabled = false\n'),
     ["escalation.socket_dir is required"]),
    ("no-profiles", "«" + STORAGE + NETWORK + ESCALATION,
     ["no profiles: add at least one [profiles.NAME] table with an image"]),
    ("missing-image", base(profile='[profiles.«shell]\npersistent_dirs = []\n'),
     ["profiles.shell.image is required: the image gVisor runs the sandbox from (add image = "
      "\"localhost/lazaret/debian:bookworm\", which 'lazaret image build debian' makes), or say backend = "
      "\"native\" to run the host's own programs"]),

    # --- types
    ("storage-not-table", base(storage='storage = «"x"\n'), ["storage must be a table, not a string"]),
    ("data-root-integer", base(storage='[storage]\ndata_root = «7\n'),
     ["storage.data_root must be a string, not an integer"]),
    ("data-root-empty", base(storage='[storage]\ndata_root = «""\n'), ["storage.data_root must not be empty"]),
    ("enabled-string", base(escalation='[escalation]\nenabled = «"yes"\nsocket_dir = "/tmp/x"\n'),
     ["escalation.enabled must be a boolean, not a string"]),
    ("allow-not-array", base(network='[network]\ndefault_allow = «"0.0.0.0/0"\ndefault_deny = []\n'),
     ["network.default_allow must be an array, not a string"]),
    ("allow-entry-integer", base(network='[network]\ndefault_allow = ["0.0.0.0/0", «4]\ndefault_deny = []\n'),
     ["network.default_allow[1] must be a string, not an integer"]),
    ("time-limit-zero", base(escalation=ESCALATION + 'time_limit = «0\n'),
     ["escalation.time_limit: 0 seconds is out of range; give 1 to 86400 (how long an approved host command may "
      "run before it is ended)"]),
    ("auto-approve-entry-empty", base(escalation=ESCALATION + 'auto_approve = ["ls", «""]\n'),
     ["escalation.auto_approve[1] must be a non-empty string without NUL characters"]),
    # Programs that run other programs are never auto-approved, however named.
    ("auto-approve-git", base(escalation=ESCALATION + 'auto_approve = [«"git status"]\n'),
     ["escalation.auto_approve[0]: 'git status' runs git, which may never be auto-approved: git runs hooks, aliases, "
      "pagers and configuration the sandbox can plant"]),
    ("auto-approve-shell", base(escalation=ESCALATION + 'auto_approve = ["uname", «"/bin/sh -c true"]\n'),
     ["escalation.auto_approve[1]: '/bin/sh -c true' runs sh, which may never be auto-approved: a shell runs any command "
      "it is given"]),
    ("auto-approve-interpreter", base(escalation=ESCALATION + 'auto_approve = [«"python3 -V"]\n'),
     ["escalation.auto_approve[0]: 'python3 -V' runs python3, which may never be auto-approved: an interpreter runs any "
      "code it is given"]),
    ("auto-approve-runners", base(escalation=ESCALATION + 'auto_approve = [«"env", «"xargs", «"find .", «"tar tf x"]\n'),
     [f"escalation.auto_approve[{i}]: '{c}' runs {c.split()[0]}, which may never be auto-approved: it runs other programs, "
      "or code from the workspace" for i, c in enumerate(["env", "xargs", "find .", "tar tf x"])]),
    ("auto-approve-metachar", base(escalation=ESCALATION + 'auto_approve = [«"ls; rm -rf ~"]\n'),
     ["escalation.auto_approve[0]: 'ls; rm -rf ~' contains ';'; an entry is an argument vector, run without a "
      "shell"]),
    ("auto-approve-relative", base(escalation=ESCALATION + 'auto_approve = [«"./ls"]\n'),
     ["escalation.auto_approve[0]: './ls' names the program by the relative path './ls'; give a name looked up in "
      "/usr/local/bin:/usr/bin:/bin:/usr/local/sbin:/usr/sbin:/sbin, or an absolute path"]),
    ("auto-approve-missing", base(escalation=ESCALATION + 'auto_approve = [«"no-such-program-x"]\n'),
     ["escalation.auto_approve[0]: 'no-such-program-x' names 'no-such-program-x', which is not in "
      "/usr/local/bin:/usr/bin:/bin:/usr/local/sbin:/usr/sbin:/sbin"]),
    ("auto-approve-quote", base(escalation=ESCALATION + 'auto_approve = [«"echo \'open"]\n'),
     ["escalation.auto_approve[0]: 'echo \\'open' cannot be split into words: no closing quotation"]),
    ("pids-limit-too-low", base(profile=PROFILE + 'pids_limit = «8\n'),
     ["profiles.shell.pids_limit: 8 tasks is out of range; give 16 to 16384 (processes and threads inside the "
      "sandbox)"]),
    ("memory-limit-not-integer", base(profile=PROFILE + 'memory_limit = «"4G"\n'),
     ["profiles.shell.memory_limit must be an integer, not a string"]),
    ("cpu-limit-negative", base(profile=PROFILE + 'cpu_limit = «-1\n'),
     ["profiles.shell.cpu_limit: -1 CPUs is out of range; give 0 to 1024 (CPUs the sandbox may run on; 0 for all of "
      "the host's)"]),
    ("disk-limit-too-low", base(profile=PROFILE + 'disk_limit = «10\n'),
     ["profiles.shell.disk_limit: 10 MiB is out of range; give 64 to 16777216 (MiB the sandbox may write to its own "
      "root file system)"]),
    ("memory-limit-too-high", base(profile=PROFILE + 'memory_limit = «2000000\n'),
     ["profiles.shell.memory_limit: 2000000 MiB is out of range; give 64 to 1048576 (MiB of memory the sandbox's "
      "programs may hold, or 0 for no limit)"]),
    ("memory-limit-too-low", base(profile=PROFILE + 'memory_limit = «63\n'),
     ["profiles.shell.memory_limit: 63 MiB is out of range; give 64 to 1048576 (MiB of memory the sandbox's "
      "programs may hold, or 0 for no limit)"]),
    ("image-not-string", base(profile='[profiles.shell]\nimage = «["a"]\n'),
     ["profiles.shell.image must be a string, not an array"]),

    # --- CIDRs
    ("deny-host-bits", base(network='[network]\ndefault_allow = []\ndefault_deny = [«"10.1.0.0/8"]\n'),
     ["network.default_deny[0]: '10.1.0.0/8' is not a valid CIDR: host bits are set "
      "(the address must be the network address of the prefix)"]),
    ("allow-no-prefix", base(network='[network]\ndefault_allow = [«"1.2.3.4"]\ndefault_deny = []\n'),
     ["network.default_allow[0]: '1.2.3.4' is not a valid CIDR: missing prefix length "
      "(write e.g. 10.0.0.0/8 or 2001:db8::/32)"]),
    ("egress-v6-too-long", base(extra='allow_egress = [«"2001:db8::/129"]\n'),
     ["profiles.shell.allow_egress[0]: '2001:db8::/129' is not a valid CIDR: prefix length is larger than 128"]),
    ("egress-hostname", base(extra='allow_egress = ["::/0", «"example.com/32"]\n'),
     ["profiles.shell.allow_egress[1]: 'example.com/32' is not a valid CIDR: not an IPv4 or IPv6 address"]),
    ("deny-not-array", base(network='[network]\ndefault_allow = []\ndefault_deny = «"10.0.0.0/8"\n'),
     ["network.default_deny must be an array, not a string"]),
    ("allow-entry-not-string", base(network='[network]\ndefault_allow = ["0.0.0.0/0", «1]\ndefault_deny = []\n'),
     ["network.default_allow[1] must be a string, not an integer"]),
    ("egress-entry-empty", base(extra='allow_egress = [«""]\n'),
     ["profiles.shell.allow_egress[0] must be a non-empty string without NUL characters"]),
    # --- the Derived Network Policy (schema, decision 7)
    ("policy-equal-prefix-conflict",
     base(network='[network]\ndefault_allow = ["0.0.0.0/0", "10.0.0.0/8"]\ndefault_deny = [«"10.0.0.0/8"]\n'),
     ["network.default_deny[0]: 10.0.0.0/8 is both allowed and denied; an equal prefix cannot have two actions "
      "(use a longer prefix for the exception) (the other is network.default_allow[1] at {file}:4:31)"]),
    ("policy-egress-conflicts-with-deny", base(extra='allow_egress = [«"10.0.0.0/8"]\n'),
     ["profiles.shell.allow_egress[0]: 10.0.0.0/8 is both allowed and denied; an equal prefix cannot have two "
      "actions (use a longer prefix for the exception) (the other is network.default_deny[0] at {file}:5:17) "
      "(profile shell)"]),
    ("policy-default-conflict",
     base(network='[network]\ndefault_allow = ["0.0.0.0/0"]\ndefault_deny = ["::/0", «"0.0.0.0/0"]\n'),
     ["network.default_deny[1]: 0.0.0.0/0 is both allowed and denied; an equal prefix cannot have two actions "
      "(use a longer prefix for the exception) (the other is network.default_allow[0] at {file}:4:18)"]),
    ("policy-v6-entry-v6-disabled",
     base(network='[network]\nipv6 = "disabled"\ndefault_allow = ["0.0.0.0/0"]\ndefault_deny = [«"fe80::/10"]\n'),
     ['network.default_deny[0]: fe80::/10 is an IPv6 prefix, but IPv6 is disabled (network.ipv6 = "disabled"); '
      'remove it or enable IPv6']),
    ("policy-ipv6-bad-value", base(network=NETWORK + 'ipv6 = «"off"\n'),
     ["network.ipv6 must be \"enabled\" or \"disabled\", not 'off'"]),
    ("policy-resolver-denied", base(network=NETWORK + 'resolvers = [«"10.0.2.3"]\n'),
     ['network.resolvers[0]: resolver 10.0.2.3 is denied by the policy; allow it (e.g. "10.0.2.3/32" in '
      'network.default_allow) or choose another resolver']),
    ("policy-resolver-v6-disabled",
     base(network='[network]\nipv6 = "disabled"\ndefault_allow = ["0.0.0.0/0"]\ndefault_deny = []\n'
                  'resolvers = [«"2001:db8::53"]\n'),
     ['network.resolvers[0]: resolver 2001:db8::53 is an IPv6 address, but IPv6 is disabled '
      '(network.ipv6 = "disabled")']),
    ("policy-resolver-with-port", base(network=NETWORK + 'resolvers = [«"192.0.2.53:53"]\n'),
     ["network.resolvers[0]: '192.0.2.53:53' is not an IPv4 or IPv6 address (write the address alone, without a "
      "port or prefix length)"]),
    ("policy-probe-denied", base(network=NETWORK + 'probe_targets = ["192.0.2.1:80", «"10.1.1.1:443"]\n'),
     ["network.probe_targets[1]: 10.1.1.1 is denied by the policy of profile shell; a probe target must be a "
      "destination the sandbox may reach"]),
    ("policy-probe-v6-no-brackets", base(network=NETWORK + 'probe_targets = [«"2001:db8::1:80"]\n'),
     ["network.probe_targets[0]: '2001:db8::1:80' is not ADDRESS:PORT (e.g. \"198.51.100.7:443\" or "
      "\"[2001:db8::7]:443\", port 1-65535)"]),
    ("policy-probe-port-zero", base(network=NETWORK + 'probe_targets = [«"192.0.2.1:0"]\n'),
     ["network.probe_targets[0]: '192.0.2.1:0' is not ADDRESS:PORT (e.g. \"198.51.100.7:443\" or "
      "\"[2001:db8::7]:443\", port 1-65535)"]),
    ("policy-probe-dns-name", base(network=NETWORK + 'probe_dns_name = «"a b"\n'),
     ["network.probe_dns_name: 'a b' is not a DNS name (letters, digits, '-', '_' and dots; at most 253 "
      "characters)"]),

    # --- paths, expansion, sanitation (spec 3.2)
    ("data-root-relative", base(storage='[storage]\ndata_root = «"data"\n'),
     ["storage.data_root: path 'data' is not absolute after expansion (start it with '/' or '~/')"]),
    ("data-root-dotdot", base(storage='[storage]\ndata_root = «"/tmp/../etc/lz"\n'),
     ["storage.data_root: path '/tmp/../etc/lz' contains a '..' segment after expansion; refusing it"]),
    ("data-root-tilde-user", base(storage='[storage]\ndata_root = «"~root/lz"\n'),
     ["storage.data_root: '~root': only a leading '~' or '~/' is expanded, '~user' is not supported"]),
    ("data-root-token", base(storage='[storage]\ndata_root = «"/srv/{profile_name}"\n'),
     ["storage.data_root: token '{profile_name}' cannot be used in this field"]),
    ("socket-dir-relative", base(escalation='[escalation]\nenabled = true\nsocket_dir = «"run/lz"\n'),
     ["escalation.socket_dir: path 'run/lz' is not absolute after expansion (start it with '/' or '~/')"]),
    ("volume-unknown-token", base(extra='volumes = [{ host = «"{profle_dir}/home", container = "/h" }]\n'),
     ["profiles.shell.volumes[0].host: unknown token '{profle_dir}' (known: {profile_name}, {profile_dir}, "
      "{domain_hash}, {domain_dir}, {workspace_dir})"]),
    ("volume-unterminated-token", base(extra='volumes = [{ host = «"{profile_dir/home", container = "/h" }]\n'),
     ["profiles.shell.volumes[0].host: unterminated token '{profile_dir/home': a '{' must open one of the {tokens}"]),
    ("volume-dotdot-after-expansion",
     base(extra='volumes = [{ host = «"{workspace_dir}/../secrets", container = "/s" }]\n'),
     ["profiles.shell.volumes[0].host: path '{work}/../secrets' contains a '..' segment after expansion; "
      "refusing it"]),
    ("volume-host-relative", base(extra='volumes = [{ host = «"cache", container = "/c" }]\n'),
     ["profiles.shell.volumes[0].host: path 'cache' is not absolute after expansion (start it with '/' or '~/')"]),
    ("volume-container-relative", base(extra='volumes = [{ host = "/tmp", container = «"c" }]\n'),
     ["profiles.shell.volumes[0].container: 'c' must be an absolute path in the sandbox"]),
    ("volume-container-dotdot", base(extra='volumes = [{ host = "/tmp", container = «"/a/../etc" }]\n'),
     ["profiles.shell.volumes[0].container: path '/a/../etc' contains a '..' segment; refusing it"]),
    ("volume-container-reserved",
     base(extra='volumes = [{ host = "/tmp", container = «"/run/lazaret/escalate.sock" }]\n'),
     ["profiles.shell.volumes[0].container: '/run/lazaret/escalate.sock' is reserved by Lazaret (/, /workspace, "
      "/run/lazaret, /proc, /sys and /dev cannot be volume targets)"]),
    ("volume-container-workspace", base(extra='volumes = [{ host = "/tmp", container = «"/workspace/" }]\n'),
     ["profiles.shell.volumes[0].container: '/workspace/' is reserved by Lazaret (/, /workspace, "
      "/run/lazaret, /proc, /sys and /dev cannot be volume targets)"]),
    ("volume-container-duplicate",
     base(extra='volumes = [{ host = "/tmp", container = "/x" },\n  { host = "/var", container = «"/x/" }]\n'),
     ["profiles.shell.volumes[1].container: '/x/' is already the target of profiles.shell.volumes[0]"]),
    ("volume-mode-unknown", base(extra='volumes = [{ host = "/tmp", container = "/x", mode = «"ro,rx" }]\n'),
     ["profiles.shell.volumes[0].mode: unknown option 'rx' (allowed: ro, rw, z, Z, comma-separated)"]),
    ("volume-mode-contradiction", base(extra='volumes = [{ host = "/tmp", container = "/x", mode = «"ro,rw" }]\n'),
     ["profiles.shell.volumes[0].mode: 'ro' and 'rw' contradict each other"]),
    ("volume-missing-host", base(extra='volumes = [«{ container = "/x" }]\n'),
     ["profiles.shell.volumes[0].host is required"]),
    ("volume-not-table", base(extra='volumes = [«"/tmp:/x"]\n'),
     ["profiles.shell.volumes[0] must be a table with host, container and mode, not a string"]),
    ("persistent-relative", base(extra='persistent_dirs = ["/usr", «"var"]\n'),
     ["profiles.shell.persistent_dirs[1]: 'var' must be an absolute path in the sandbox"]),

    # --- profiles (spec 3.2.3)
    ("profile-uppercase", base(profile='[profiles.«Claude]\nimage = "localhost/a:1"\n'),
     ["profile name 'Claude' is not allowed: use 2 to 32 characters from a-z, 0-9, '_' and '-' "
      "(^[a-z0-9_-]{2,32}$)"]),
    ("profile-too-short", base(profile='[profiles.«a]\nimage = "localhost/a:1"\n'),
     ["profile name 'a' is not allowed: use 2 to 32 characters from a-z, 0-9, '_' and '-' (^[a-z0-9_-]{2,32}$)"]),
    ("profile-dots", base(profile='[profiles.«"../x"]\nimage = "localhost/a:1"\n'),
     ["profile name '../x' is not allowed: use 2 to 32 characters from a-z, 0-9, '_' and '-' "
      "(^[a-z0-9_-]{2,32}$)"]),
    ("profile-too-long", base(profile='[profiles.«' + "a" * 33 + ']\nimage = "localhost/a:1"\n'),
     ["profile name '" + "a" * 33 + "' is not allowed: use 2 to 32 characters from a-z, 0-9, '_' and '-' "
      "(^[a-z0-9_-]{2,32}$)"]),
    ("image-unqualified", base(profile='[profiles.shell]\nimage = «"debian:bookworm"\n'),
     ["profiles.shell.image: 'debian:bookworm' is not a valid image reference: not fully qualified: name the "
      "registry, e.g. docker.io/library/debian:bookworm"]),
    ("image-bad-digest", base(profile='[profiles.shell]\nimage = «"docker.io/library/debian@sha256:abc"\n'),
     ["profiles.shell.image: 'docker.io/library/debian@sha256:abc' is not a valid image reference: the digest "
      "must be '@sha256:' followed by 64 lowercase hex digits"]),
    ("image-uppercase", base(profile='[profiles.shell]\nimage = «"docker.io/Library/debian:12"\n'),
     ["profiles.shell.image: 'docker.io/Library/debian:12' is not a valid image reference: the repository path "
      "must be lowercase letters, digits and . _ - /"]),
    ("env-bad-name", base(extra='env = { «"1X" = "a" }\n'),
     ["profiles.shell.env: '1X' is not a valid variable name (letters, digits and '_', not starting with a digit)"]),
    ("env-reserved", base(extra='env = { «LAZARET_SESSION_ID = "x" }\n'),
     ["profiles.shell.env: 'LAZARET_SESSION_ID' is reserved: Lazaret sets LAZARET_* variables itself"]),
    ("env-integer", base(extra='env = { PORT = «8080 }\n'),
     ["profiles.shell.env.PORT must be a string, not an integer"]),
    ("env-bad-host-name", base(extra='env = { TOKEN = «"env:MY-TOKEN" }\n'),
     ["profiles.shell.env.TOKEN: 'env:' must be followed by a host variable name, got 'MY-TOKEN'"]),
    ("env-host-variable-missing", base(extra='env = { TOKEN = «"env:LAZARET_TEST_UNSET_VARIABLE" }\n'),
     ["profiles.shell.env.TOKEN: host variable LAZARET_TEST_UNSET_VARIABLE is not set "
      "(export it, or change the value)"]),

    ("command-empty", base(extra='command = «[]\n'),
     ["profiles.shell.command must name a program: it is an empty array"]),
    ("command-string", base(extra='command = «"claude --yes"\n'),
     ["profiles.shell.command must be an array, not a string"]),
    ("command-empty-program", base(extra='command = [«"", "x"]\n'),
     ["profiles.shell.command[0] must name a program, not be empty"]),
    ("command-integer-arg", base(extra='command = ["x", «1]\n'),
     ["profiles.shell.command[1] must be a string, not an integer"]),
    ("runsc-network-unknown", base(extra='runsc_network = «"bridge"\n'),
     ["profiles.shell.runsc_network: 'bridge' is not one of \"sandbox\" (gVisor's network stack) or \"host\""]),
    ("backend-unknown", base(extra='backend = «"docker"\n'),
     ["profiles.shell.backend: 'docker' is not one of \"gvisor\" (Podman and gVisor, the default) or \"native\" "
      "(Landlock, namespaces and seccomp on the host's kernel)"]),
    ("backend-integer", base(extra='backend = «1\n'),
     ["profiles.shell.backend must be a string, not an integer"]),
    ("workspace-mode-unknown", base(extra='workspace_mode = «"copy"\n'),
     ["profiles.shell.workspace_mode: 'copy' is not one of \"branch\" (the agent works on its own git branch) or "
      "\"direct\" (on the host's working tree)"]),
    ("runsc-network-bool", base(extra='runsc_network = «true\n'),
     ["profiles.shell.runsc_network must be a string, not a boolean"]),

    # --- several errors at once: all reported, in order
    ("two-errors", base(storage='[storage]\ndata_root = «"rel"\n', extra='«bogus = 1\n'),
     ["storage.data_root: path 'rel' is not absolute after expansion (start it with '/' or '~/')",
      "unknown key 'bogus' in [profiles.shell] (known: preset, image, command, runsc_network, backend, workspace_mode, persistent_dirs, pids_limit, memory_limit, cpu_limit, disk_limit, allow_egress, inherit_default_allow, allow_domains, check_server_name, status_line, clipboard, ca_certificates, env, volumes)"]),
]


@pytest.mark.parametrize("name,text,messages", CASES, ids=[c[0] for c in CASES])
def test_bad_config(lz, name, text, messages):
    root = os.path.join(lz.base, "r")
    text = text.replace("{root}", root)
    clean, marks = locate(text)
    assert len(marks) == len(messages), "test case: one marker per message"
    path = lz.write("home/.config/lazaret/config.toml", clean)
    r = lz.run("config", "check")
    want = [f"{path}:{line}:{col}: {m.replace('{work}', lz.work).replace('{file}', path)}"
            for (line, col), m in zip(marks, messages)]
    assert r.stderr.splitlines() == want, r.stderr
    assert r.returncode == 65
    assert r.stdout == ""
    # Validation creates nothing: no data root, no socket directory.
    assert not os.path.exists(root)


def test_invalid_utf8(lz):
    path = os.path.join(lz.home, "bad.toml")
    with open(path, "wb") as f:
        f.write(BASE.replace("{root}", lz.base).encode() + b'x = "\xff"\n')
    os.chown(path, lz.user.pw_uid, lz.user.pw_gid)
    r = lz.run("config", "check", "--config", path)
    assert r.stderr.splitlines() == [f"{path}:11:6: invalid UTF-8 (byte 0xFF)"]
    assert r.returncode == 65


def test_missing_explicit_config(lz):
    lz.write("home/.config/lazaret/config.toml", BASE.replace("{root}", lz.base))
    missing = os.path.join(lz.base, "nope.toml")
    r = lz.run("config", "check", "--config", missing)
    assert r.stderr.splitlines() == [f"{missing}:1:1: cannot read: No such file or directory"]
    assert r.returncode == 65


def test_config_is_directory(lz):
    d = os.path.join(lz.base, "home")
    r = lz.run("--config", d, "config", "check")
    assert r.stderr.splitlines() == [f"{d}:1:1: cannot read: Is a directory"]
    assert r.returncode == 65


def test_file_too_large(lz):
    text = BASE.replace("{root}", lz.base) + "# " + "x" * (1024 * 1024) + "\n"
    path = lz.write("big.toml", text)
    r = lz.run("config", "check", "--config", path)
    assert r.stderr.splitlines() == [
        f"{path}:1:1: file is larger than 1048576 bytes; a configuration file is never this big"]
    assert r.returncode == 65


def test_merge_conflict_between_files(lz):
    user = lz.write("home/.config/lazaret/config.toml", BASE.replace("{root}", lz.base))
    local = lz.write("work/lazaret.toml", '[profiles]\nshell = "x"\n')
    r = lz.run("config", "check")
    assert r.stderr.splitlines() == [
        f"{local}:2:1: 'shell' is a string here but a table in {user}:9:11; a table and a value cannot be merged"]
    assert r.returncode == 65


def test_no_configuration(lz):
    r = lz.run("config", "check")
    user = os.path.join(lz.home, ".config/lazaret/config.toml")
    local = os.path.join(lz.work, "lazaret.toml")
    assert r.stderr.splitlines() == [
        f"lazaret: error: no configuration found (looked for {user} and {local}); "
        "run 'lazaret init' to write a starter file"]
    assert r.returncode == 65


def test_unpinned_image_is_a_warning(lz):
    text = BASE.replace("{root}", lz.base).replace("localhost/lazaret/test:1", "docker.io/library/debian:12")
    path = lz.write("home/.config/lazaret/config.toml", text)
    r = lz.run("config", "check")
    assert r.returncode == 0, r.stderr
    assert r.stderr.splitlines() == [
        f"{path}:10:9: warning: profiles.shell.image: 'docker.io/library/debian:12' is not pinned by digest; "
        "append @sha256:<digest> so the sandbox cannot change under you"]
