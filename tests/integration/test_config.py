# SPDX-License-Identifier: MIT
"""The configuration contract from the user's side: hierarchy and merge,
config show (text and JSON, with provenance), init, example.toml, global
options, expansion against the real home directory."""
import hashlib
import ipaddress
import json
import os
import pwd
import subprocess
import tomllib

import pytest

from conftest import tool_dir

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

BASE = """[storage]
data_root = "~/data"
[network]
default_allow = ["0.0.0.0/0"]
default_deny = ["10.0.0.0/8", "fe80::/10"]
[escalation]
enabled = true
socket_dir = "/tmp/lz-sock"
[profiles.claude]
image = "localhost/agent:1"
env = { A = "1" }
volumes = [{ host = "{profile_dir}/home", container = "/root", mode = "ro" }]
"""


def domain_hash(profile, workspace):
    return hashlib.sha256(f"{profile}:{workspace}".encode()).hexdigest()[:12]


def user_cfg(lz, text=BASE):
    return lz.write("home/.config/lazaret/config.toml", text)


def test_check_ok(lz):
    path = user_cfg(lz)
    r = lz.run("config", "check")
    assert r.returncode == 0, r.stderr
    assert r.stdout == f"configuration valid: 1 profile from {path}\n"
    assert r.stderr == ""


def test_hierarchy_and_merge(lz):
    user = user_cfg(lz)
    local = lz.write("work/lazaret.toml",
                     '[network]\ndefault_deny = ["192.168.0.0/16"]\n'
                     '[profiles.claude]\nimage = "localhost/agent:2"\nenv.B = "2"\n'
                     '[profiles.shell]\nimage = "localhost/sh:1"\n')
    explicit = lz.write("explicit.toml", "[escalation]\nenabled = false\n")
    # The workspace file sets images: it must be trusted to (test_trust.py).
    assert lz.run("trust", "--yes").returncode == 0
    r = lz.run("config", "show", "--json", "--config", explicit)
    assert r.returncode == 0, r.stderr
    j = json.loads(r.stdout)
    assert j["files"] == [user, local, explicit]
    c = j["config"]
    # scalars: the higher-precedence file wins, with its position
    assert c["escalation"]["enabled"] == {"value": False, "file": explicit, "line": 2, "column": 11}
    assert c["profiles"]["claude"]["image"] == {"value": "localhost/agent:2", "file": local, "line": 4,
                                                "column": 9}
    # arrays are replaced whole, not appended
    assert c["network"]["default_deny"]["value"] == ["192.168.0.0/16"]
    assert c["network"]["default_deny"]["file"] == local
    assert c["network"]["default_allow"]["file"] == user
    # tables merge key by key, inline or not
    assert c["profiles"]["claude"]["env"]["A"]["file"] == user
    assert c["profiles"]["claude"]["env"]["B"]["file"] == local
    assert set(c["profiles"]) == {"claude", "shell"}


def test_xdg_config_home(lz):
    xdg = os.path.join(lz.base, "xdg")
    path = lz.write("xdg/lazaret/config.toml", BASE)
    user_cfg(lz, "this is not toml")  # must be ignored: XDG_CONFIG_HOME wins
    r = lz.run("config", "check", env={"XDG_CONFIG_HOME": xdg})
    assert r.returncode == 0, r.stderr
    assert path in r.stdout
    # A relative XDG_CONFIG_HOME is invalid by the XDG spec and ignored.
    r = lz.run("config", "check", env={"XDG_CONFIG_HOME": "relative/xdg"})
    assert r.returncode == 65


def test_show_resolves_per_profile(lz):
    user_cfg(lz)
    r = lz.run("config", "show", "--json", "--profile", "claude")
    assert r.returncode == 0, r.stderr
    j = json.loads(r.stdout)
    data = os.path.join(lz.home, "data")
    h = domain_hash("claude", lz.work)
    assert j["workspace"] == lz.work
    assert j["resolved"]["data_root"] == data
    prof = j["resolved"]["profiles"]["claude"]
    assert prof.pop("network_policy")["digest"]
    assert prof == {
        "profile_dir": f"{data}/claude",
        "repo_root": None,  # no git repository around the workspace
        "workspace_subdir": None,
        "domain_hash": h,
        "domain_dir": f"{data}/domains/{h}",
        "volumes": [{"host": f"{data}/claude/home", "container": "/root", "read_only": True}],
    }


def test_show_text(lz):
    path = user_cfg(lz)
    r = lz.run("config", "show")
    assert r.returncode == 0, r.stderr
    out = r.stdout
    data = os.path.join(lz.home, "data")
    h = domain_hash("claude", lz.work)
    assert f"# lazaret configuration for workspace {lz.work}\n" in out
    assert "\n[storage]\n" in out
    line = next(li for li in out.splitlines() if li.startswith("data_root = "))
    assert line.startswith('data_root = "~/data"')
    assert line.endswith(f"# {path}:2:13")
    assert "\n[profiles.claude]\n" in out
    assert f"# resolved: domain_hash = {h}\n" in out
    assert f"# resolved: domain_dir  = {data}/domains/{h}\n" in out
    assert f"# resolved: profile_dir = {data}/claude\n" in out
    # The text form is itself valid TOML holding the merged values.
    doc = tomllib.loads(out)
    assert doc["storage"]["data_root"] == "~/data"
    assert doc["profiles"]["claude"]["volumes"][0]["mode"] == "ro"


def test_show_unknown_profile(lz):
    user_cfg(lz)
    r = lz.run("config", "show", "--profile", "nope")
    assert r.returncode == 64
    assert r.stderr == "lazaret: error: no profile 'nope' in the configuration (configured: claude)\n"


def test_symlinked_workspace_same_domain(lz):
    user_cfg(lz)
    link = os.path.join(lz.base, "link")
    os.symlink(lz.work, link)
    r = lz.run("config", "show", "--json", "--workspace", link)
    assert r.returncode == 0, r.stderr
    j = json.loads(r.stdout)
    assert j["workspace"] == lz.work
    assert j["resolved"]["profiles"]["claude"]["domain_hash"] == domain_hash("claude", lz.work)


def test_global_options_anywhere_before_dashdash(lz):
    cfg = lz.write("c.toml", BASE)
    other = os.path.join(lz.base, "ws2")
    os.makedirs(other)
    forms = [
        ["--config", cfg, "--workspace", other, "config", "show", "--json"],
        ["config", "--config", cfg, "show", "--workspace", other, "--json"],
        ["config", "show", "--json", f"--config={cfg}", f"--workspace={other}"],
    ]
    outs = []
    for f in forms:
        r = lz.run(*f)
        assert r.returncode == 0, (f, r.stderr)
        j = json.loads(r.stdout)
        assert j["files"] == [cfg]
        assert j["workspace"] == other
        outs.append(r.stdout)
    assert outs[0] == outs[1] == outs[2]
    # After "--" they are not global options any more.
    r = lz.run("config", "check", "--", "--config", cfg)
    assert r.returncode == 64
    r = lz.run("config", "check", "--config")
    assert r.returncode == 64
    assert r.stderr == "lazaret: error: option --config needs a value\n"


def test_bad_workspace(lz):
    user_cfg(lz)
    r = lz.run("--workspace", os.path.join(lz.base, "missing"), "config", "check")
    assert r.returncode == 64
    assert r.stderr == f"lazaret: error: workspace {os.path.join(lz.base, 'missing')}: No such file or directory\n"


def test_home_from_passwd_when_unset(lz, test_user):
    """~ is $HOME, and the passwd entry when HOME is unset."""
    text = BASE.replace('"~/data"', '"~/lz-data"')
    cfg = lz.write("c.toml", text)
    r = lz.run("config", "show", "--json", "--config", cfg, env={"HOME": None})
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["resolved"]["data_root"] == os.path.join(test_user.pw_dir, "lz-data")
    r = lz.run("config", "show", "--json", "--config", cfg)
    assert json.loads(r.stdout)["resolved"]["data_root"] == os.path.join(lz.home, "lz-data")


def test_data_root_symlink_resolved(lz):
    real = os.path.join(lz.base, "real")
    os.makedirs(real)
    os.symlink(real, os.path.join(lz.home, "via-link"))
    user_cfg(lz, BASE.replace('"~/data"', '"~/via-link/sub/./dir"'))
    r = lz.run("config", "show", "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["resolved"]["data_root"] == f"{real}/sub/dir"


def test_env_from_host(lz):
    user_cfg(lz, BASE.replace('env = { A = "1" }', 'env = { A = "env:LZ_TEST_TOKEN" }'))
    r = lz.run("config", "check", env={"LZ_TEST_TOKEN": "x"})
    assert r.returncode == 0, r.stderr
    r = lz.run("config", "check")
    assert r.returncode == 65
    assert "host variable LZ_TEST_TOKEN is not set" in r.stderr


def test_init_writes_valid_starter(lz):
    r = lz.run("init")
    assert r.returncode == 0, r.stderr
    path = os.path.join(lz.home, ".config/lazaret/config.toml")
    assert r.stdout.startswith(f"wrote {path}\n")
    text = open(path, encoding="utf-8").read()
    assert text.startswith("# Lazaret configuration")
    r = lz.run("config", "check")
    assert r.returncode == 0, r.stderr
    # An independent TOML parser agrees it is TOML, and the starter denies
    # the private, loopback, link-local and metadata ranges of both families.
    doc = tomllib.loads(text)
    for cidr in ("10.0.0.0/8", "127.0.0.0/8", "169.254.0.0/16"):
        assert cidr in doc["network"]["default_deny"]
    # Rootless: slirp4netns's forwarder, and IPv6 as the host routes it
    # (measured here by a route lookup, which sends nothing).
    assert doc["network"]["resolvers"] == ["10.0.2.3"]
    v6 = subprocess.run(["ip", "-6", "route", "get", "2001:db8::1"], capture_output=True, text=True)
    uplink = v6.returncode == 0 and not v6.stdout.startswith(("unreachable", "prohibit", "blackhole"))
    assert doc["network"]["ipv6"] == ("enabled" if uplink else "disabled"), (v6.stdout, doc["network"])
    for cidr in ("::1/128", "fe80::/10", "fd00:ec2::254/128"):
        assert (cidr in doc["network"]["default_deny"]) == uplink
    # gVisor's own network stack, as the runsc setup installs starts it.
    assert doc["profiles"]["shell"]["runsc_network"] == "sandbox"
    # With Debian's 2022 runsc first on PATH, which cannot, the kernel's.
    ver = subprocess.run(["/usr/bin/runsc", "--version"], capture_output=True, text=True).stdout
    if "20221219" not in ver:
        pytest.skip(f"LOUD SKIP: /usr/bin/runsc is not Debian's 20221219 ({ver!r}); no runsc known to fail")
    tools = tool_dir(lz, omit={"runsc"}, fakes={"runsc": '#!/bin/sh\nexec /usr/bin/runsc "$@"\n'})
    r = lz.run("init", "--force", env={"PATH": tools})
    assert r.returncode == 0, r.stderr
    doc = tomllib.loads(open(path, encoding="utf-8").read())
    assert doc["profiles"]["shell"]["runsc_network"] == "host"


def host_ipv4_resolver():
    """The first IPv4 nameserver of resolv.conf a bridged sandbox can reach,
    read independently of lazaret."""
    for line in open("/etc/resolv.conf"):
        f = line.split()
        if len(f) >= 2 and f[0] == "nameserver":
            try:
                a = ipaddress.ip_address(f[1].split("%")[0])
            except ValueError:
                continue
            if a.version == 4 and not a.is_loopback and not a.is_link_local:
                return str(a)
    return None


@pytest.mark.skipif(os.geteuid() != 0, reason="rootful init needs root")
def test_init_as_root_fits_rootful_podman(lazaret_bin, tmp_path):
    """Run by root, init writes what rootful Podman's bridge can do: no
    IPv6, the host's own resolver (allowed by a /32), and it validates."""
    env = {"PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "HOME": str(tmp_path),
           "XDG_CONFIG_HOME": str(tmp_path / "xdg")}
    lazaret = lazaret_bin
    r = subprocess.run([lazaret, "init"], capture_output=True, text=True, env=env, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    path = tmp_path / "xdg/lazaret/config.toml"
    doc = tomllib.loads(path.read_text())
    net = doc["network"]
    assert net["ipv6"] == "disabled"
    assert not [c for c in net["default_allow"] + net["default_deny"] if ":" in c], net
    res = host_ipv4_resolver()
    assert net["resolvers"] == ([res] if res else []), net
    if res:
        assert f"{res}/32" in net["default_allow"]
    r = subprocess.run([lazaret, "--config", str(path), "config", "check"], capture_output=True, text=True,
                       env=env, cwd=tmp_path)
    assert r.returncode == 0, r.stderr


def test_init_never_overwrites(lz):
    path = user_cfg(lz, "# mine\n" + BASE)
    r = lz.run("init")
    assert r.returncode == 125
    assert r.stderr == (f"lazaret: error: {path} already exists; keeping it "
                        "(use 'lazaret init --force' to replace it)\n")
    assert open(path).read().startswith("# mine\n")
    r = lz.run("init", "--force")
    assert r.returncode == 0, r.stderr
    assert open(path).read().startswith("# Lazaret configuration")


def test_init_socket_dir_uses_runtime_dir(lz, test_user):
    r = lz.run("init", env={"XDG_RUNTIME_DIR": "/run/user/4242"})
    assert r.returncode == 0
    doc = tomllib.load(open(os.path.join(lz.home, ".config/lazaret/config.toml"), "rb"))
    assert doc["escalation"]["socket_dir"] == "/run/user/4242/lazaret"
    r = lz.run("init", "--force")
    doc = tomllib.load(open(os.path.join(lz.home, ".config/lazaret/config.toml"), "rb"))
    assert doc["escalation"]["socket_dir"] == f"/tmp/lazaret-{test_user.pw_uid}"


def test_example_toml(lz):
    """example.toml in the repository is valid (given its host variables)."""
    src = open(os.path.join(REPO, "example.toml"), encoding="utf-8").read()
    path = lz.write("example.toml", src)
    doc = tomllib.loads(src)
    assert {"claude", "codex", "aider", "shell"} <= set(doc["profiles"])
    env = {"ANTHROPIC_API_KEY": "a", "OPENAI_API_KEY": "o"}
    r = lz.run("config", "check", "--config", path, env=env)
    assert r.returncode == 0, r.stderr
    # Unpinned images are warnings, one per profile that pulls from a registry.
    assert [ln for ln in r.stderr.splitlines() if "warning:" not in ln] == []
    assert len(r.stderr.splitlines()) == 3
    r = lz.run("config", "check", "--config", path, env={"ANTHROPIC_API_KEY": "a"})
    assert r.returncode == 65
    assert "host variable OPENAI_API_KEY is not set" in r.stderr


def test_usage_errors(lz):
    assert lz.run().returncode == 64
    r = lz.run("frobnicate")
    assert r.returncode == 64
    assert r.stderr == "lazaret: error: unknown verb 'frobnicate'; run 'lazaret --help' for the list\n"
    assert lz.run("config").returncode == 64
    assert lz.run("config", "frob").returncode == 64
    assert lz.run("config", "check", "--bogus").returncode == 64
    assert lz.run("--help").returncode == 0
    assert lz.run("--version").stdout.startswith("lazaret ")


def test_show_derived_network_policy(lz):
    """config show prints the Derived Network Policy and its digest; the
    digest is SHA-256 of the canonical form with the domain separator,
    recomputed here; the profile's allow_egress joins [network]."""
    user_cfg(lz, BASE.replace('default_allow = ["0.0.0.0/0"]',
                              'default_allow = ["0.0.0.0/0", "10.0.2.3/32"]\n'
                              'resolvers = ["10.0.2.3", "10.0.2.3"]\nipv6 = "enabled"')
             + 'allow_egress = ["10.1.0.0/16", "2001:db8::/32"]\n')
    r = lz.run("config", "show", "--json")
    assert r.returncode == 0, r.stderr
    pol = json.loads(r.stdout)["resolved"]["profiles"]["claude"]["network_policy"]
    canonical = ("lazaret-derived-network-policy v1\n"
                 "family ipv4 enabled default allow\n"
                 "family ipv6 enabled default deny\n"
                 "rule 10.0.0.0/8 deny\n"
                 "rule 10.0.2.3/32 allow\n"
                 "rule 10.1.0.0/16 allow\n"
                 "rule 2001:db8::/32 allow\n"
                 "rule fe80::/10 deny\n"
                 "resolver 10.0.2.3\n")
    assert pol["canonical"] == canonical
    digest = hashlib.sha256(b"lazaret/derived-network-policy/v1\n" + canonical.encode()).hexdigest()
    assert pol["digest"] == digest
    assert pol["address_families"] == [
        {"family": "ipv4", "disposition": "enabled", "default_action": "allow"},
        {"family": "ipv6", "disposition": "enabled", "default_action": "deny"}]
    assert pol["resolvers"] == [{"family": "ipv4", "address": "10.0.2.3"}]
    assert {"family": "ipv6", "network": "fe80::/10", "action": "deny"} in pol["prefix_rules"]

    r = lz.run("config", "show")
    assert r.returncode == 0, r.stderr
    assert f"# resolved: network policy sha256 = {digest}\n" in r.stdout
    assert "# resolved: network policy: rule 10.1.0.0/16 allow\n" in r.stdout
    # IPv4: the complement of 10.0.0.0/8 except 10.0.2.3 and 10.1.0.0/16, as
    # gateway routes; IPv6: only 2001:db8::/32. Never a default route.
    assert "# resolved: network routes ipv6 = 1 gateway, 1 prohibit\n" in r.stdout
    # The text form stays valid TOML.
    tomllib.loads(r.stdout)


def test_prefix_entry_for_a_file_reader_is_warned_about(lz):
    """config check (and only it) warns about an auto_approve prefix entry
    for a program that reads files."""
    text = BASE.replace("[escalation]\n", '[escalation]\nauto_approve = ["uname -a", "cat ...", "df -h ..."]\n', 1)
    path = user_cfg(lz, text)
    r = lz.run("config", "check")
    assert r.returncode == 0, r.stderr
    line = next(i for i, x in enumerate(text.splitlines(), 1) if x.startswith("auto_approve"))
    assert r.stderr.splitlines() == [
        f"{path}:{line}:29: warning: escalation.auto_approve[1]: 'cat ...' lets the sandbox add words to a program "
        "that reads files; each added word must name a file in the workspace, but an exact entry (without '...') "
        "is safer"]
    assert lz.run("config", "show").stderr == ""
