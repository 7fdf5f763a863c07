# SPDX-License-Identifier: MIT
"""Egress by name end to end (issue 18): a sandbox whose profile lists
names and no address reaches those names through lazaret-relay (inside)
and the Domain's broker (on the host), and nothing else: not an unlisted
name, not a listed name that resolves to a private address, not an
address directly, not DNS. The test hosts (a DNS server, an HTTP server,
an echo server) live in a network namespace the test makes."""
import glob
import json
import os
import socket
import subprocess
import sys
import tempfile
import time

import pytest
import yaml

from testnet import HELPERS, NetLab, sh
from test_run import Domain, busybox_image, debian_image, kill_cli, node_image, podman, wait_sessions  # noqa: F401

ROOT4, HOST4 = "198.51.100.233", "198.51.100.234"  # the link 198.51.100.232/29; ROOT4 is the host's own
DNS = {
    "ok.example.test": {"A": [HOST4]},
    "private.example.test": {"A": ["10.1.2.3"]},
    "mixed.example.test": {"A": [HOST4, "127.0.0.1"]},
    "meta.example.test": {"A": ["169.254.169.254"]},
    "self.example.test": {"A": [ROOT4]},
    "unlisted.example.test": {"A": [HOST4]},
}
RULES = ["ok.example.test:8080", "ok.example.test:9443", "ok.example.test:2222", "ok.example.test:8443",
         "private.example.test:8080",
         "mixed.example.test:8080",
         "meta.example.test:8080", "self.example.test:8080"]


@pytest.fixture(scope="module")
def names():
    lab = NetLab()
    lab.web = tempfile.mkdtemp(prefix="lazaret-egress-web-")
    lab.log = tempfile.mktemp(prefix="lazaret-egress-", suffix=".log")
    try:
        open(lab.log, "w").close()
        with open(os.path.join(lab.web, "hello.txt"), "w") as f:
            f.write("hello by name\n")
        # An npm package as a tarball (npm install takes its URL).
        pkg = os.path.join(lab.web, "pkg", "package")
        os.makedirs(pkg)
        with open(os.path.join(pkg, "package.json"), "w") as f:
            json.dump({"name": "byname", "version": "1.0.0", "main": "index.js"}, f)
        with open(os.path.join(pkg, "index.js"), "w") as f:
            f.write("module.exports = 'installed by name';\n")
        sh("tar", "-C", os.path.dirname(pkg), "-czf", os.path.join(lab.web, "byname-1.0.0.tgz"), "package")
        # A bare repository served by git's dumb HTTP protocol.
        src = os.path.join(lab.web, "src")
        git = ["git", "-c", "user.name=t", "-c", "user.email=t@example.test", "-c", "init.defaultBranch=main"]
        sh(*git, "init", "-q", src)
        with open(os.path.join(src, "file.txt"), "w") as f:
            f.write("cloned by name\n")
        sh(*git, "-C", src, "add", "file.txt")
        sh(*git, "-C", src, "commit", "-q", "-m", "one")
        sh(*git, "clone", "-q", "--bare", src, os.path.join(lab.web, "repo.git"))
        sh("git", "-C", os.path.join(lab.web, "repo.git"), "update-server-info")
        # The SSH server's host key, and the key of the client in the
        # sandbox, which it takes (ssh-keygen: OpenSSH's own format).
        lab.ssh = tempfile.mkdtemp(prefix="lazaret-egress-ssh-")
        for k in ("host", "client"):
            sh("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "", "-f", os.path.join(lab.ssh, k))
        # A certificate authority of the test's own and the HTTPS host's
        # certificate from it (ca_certificates, issue 24).
        lab.tls = tempfile.mkdtemp(prefix="lazaret-egress-tls-")
        t = lab.tls
        ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes"]
        sh("openssl", "req", "-x509", *ec, "-keyout", f"{t}/ca.key", "-out", f"{t}/ca.pem", "-days", "2",
           "-subj", "/CN=Lazaret test CA")
        sh("openssl", "req", *ec, "-keyout", f"{t}/host.key", "-out", f"{t}/host.csr", "-subj", "/CN=ok.example.test")
        with open(f"{t}/ext", "w") as f:
            f.write("subjectAltName=DNS:ok.example.test\nbasicConstraints=CA:FALSE\n"
                    "extendedKeyUsage=serverAuth\n")
        sh("openssl", "x509", "-req", "-in", f"{t}/host.csr", "-CA", f"{t}/ca.pem", "-CAkey", f"{t}/ca.key",
           "-CAcreateserial", "-out", f"{t}/host.pem", "-days", "2", "-extfile", f"{t}/ext")
        os.chmod(t, 0o755)
        os.chmod(f"{t}/ca.pem", 0o644)
        h = lab.netns("e")
        lab.veth(None, [f"{ROOT4}/29"], h, [f"{HOST4}/29"])
        sh("ip", "-n", h, "route", "add", "default", "via", ROOT4)
        for cmd in ([os.path.join(HELPERS, "testdns.py"), HOST4, "53", json.dumps(DNS), "--log", lab.log],
                    [os.path.join(HELPERS, "testecho.py"), HOST4, "9443", "--log", lab.log],
                    [os.path.join(HELPERS, "testhttp.py"), HOST4, "8080", lab.web, "--log", lab.log],
                    [os.path.join(HELPERS, "testhttp.py"), HOST4, "8443", lab.web, "--log", lab.log,
                     "--tls", f"{t}/host.pem", f"{t}/host.key"],
                    [os.path.join(HELPERS, "testsshd.py"), HOST4, "2222", os.path.join(lab.ssh, "host"),
                     os.path.join(lab.ssh, "client.pub"), lab.web, "--log", lab.log]):
            p = subprocess.Popen(["nsenter", f"--net={lab.path(h)}", sys.executable] + cmd, stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE, text=True)
            lab.procs.append(p)
            assert p.stdout.readline().strip() == "ready", p.stderr.read()
        yield lab
    finally:
        lab.close()
        subprocess.run(["rm", "-rf", lab.web, getattr(lab, "ssh", lab.web), getattr(lab, "tls", lab.web)],
                       check=False)
        if os.path.exists(lab.log):
            os.unlink(lab.log)


def gone(lz, d):
    """After a test: the Domain ended clean (no container, mount or socket
    left), and whatever a failure left is removed."""
    try:
        d.assert_clean()
    finally:
        for name in d.container_names():
            podman(lz.user, "rm", "-f", "-t", "0", name, check=False)


def children(pid):
    """The pids whose parent is pid."""
    out = []
    for p in os.listdir("/proc"):
        try:
            if p.isdigit() and open(f"/proc/{p}/stat").read().rsplit(") ", 1)[1].split()[1] == str(pid):
                out.append(int(p))
        except OSError:
            pass
    return out


def egress_records(run, want=lambda recs: True, timeout=10):
    """The broker's decisions on the Domain's event record (lazaret events),
    once want(records) holds or the time is up: each goes through the
    record's queue and may trail the command that made it."""
    deadline = time.time() + timeout
    while True:
        r = run("events", "--json", "--source", "network")
        assert r.returncode == 0, r.stderr
        recs = []
        for line in r.stdout.splitlines():
            ev = json.loads(line)
            assert (ev["source"], ev["kind"]) == ("network", "connection"), ev
            assert line.isascii(), line
            recs.append(ev["data"])
        if want(recs) or time.time() > deadline:
            return recs
        time.sleep(0.2)


def accepts(lab):
    return [line for line in open(lab.log).read().splitlines() if line.startswith("accept ")]


@pytest.fixture(params=["host", "sandbox"])
def namedom(request, lz, busybox_image, names):  # noqa: F811
    rules = json.dumps(RULES)
    d = Domain(lz, busybox_image, runsc_network=request.param,
               network=f'default_allow = []\ndefault_deny = []\nipv6 = "disabled"\nresolvers = ["{HOST4}"]\n'
                       f'probe_domains = ["ok.example.test:8080"]\n',
               extra=f"allow_domains = {rules}\n")
    yield d
    gone(lz, d)


def test_names_reach_and_nothing_else(namedom, names):
    """Through the relay: a listed name answers (wget's plain-HTTP proxy,
    and the SSH ProxyCommand's stream); an unlisted name, listed names that
    resolve to a private, metadata, loopback or host address, a direct
    connection and DNS are all refused; no sidecar runs; the record and
    status count the decisions."""
    dom = namedom
    before = len(accepts(names))
    script = f"""
env | grep -i '^http_proxy=' | sort
wget -q -O - http://ok.example.test:8080/hello.txt; echo "ok=$?"
wget -q -O - http://unlisted.example.test:8080/hello.txt; echo "unlisted=$?"
for n in private mixed meta self; do wget -q -O - http://$n.example.test:8080/hello.txt; echo "$n=$?"; done
echo ping | /run/lazaret/relay --connect ok.example.test 9443; echo "stream=$?"
/run/lazaret/relay --probe ok.example.test 22; echo "port=$?"
nc -w 2 {HOST4} 8080 </dev/null; echo "direct=$?"
nslookup ok.example.test {HOST4} >/dev/null 2>&1; echo "dns=$?"
[ -e /run/lazaret/broker ]; echo "hostdir=$?"
[ -S /run/lazaret/dispense/broker ]; echo "sock=$?"
"""
    r = dom.run("run", "--", "/bin/sh", "-c", script, timeout=180)
    assert r.returncode == 0, r.stderr + dom.log()
    out = r.stdout
    assert "http_proxy=http://127.0.0.1:3128" in out, out
    assert "hello by name\nok=0" in out, out + dom.log()
    for bad in ("unlisted", "private", "mixed", "meta", "self", "port", "direct", "dns", "hostdir"):
        assert f"{bad}=0" not in out, out
    assert "ping\neof\nstream=0" in out, out
    assert "sock=0" in out, out
    # Only the listed name's connections reached the test host: one to the
    # echo server (the stream), and HTTP requests for ok.example.test alone
    # (mixed.example.test also resolves to the test host: refused whole).
    got = accepts(names)[before:]
    assert len(got) == 1, got
    hosts = {x.split()[-1] for x in open(names.log).read().splitlines() if x.startswith("http ")}
    assert hosts == {"ok.example.test:8080"}, hosts
    records = egress_records(dom.run, lambda recs: any(x.get("port") == 22 for x in recs))
    by = {}
    for rec in records:
        by.setdefault((rec.get("name") or rec.get("host"), rec["port"]), []).append(rec)
    assert any(x["verdict"] == "allowed" for x in by[("ok.example.test", 8080)]), records
    assert by[("unlisted.example.test", 8080)][0]["reason"] == "name-not-listed"
    for n in ("private", "mixed", "meta", "self"):
        rec = by[(f"{n}.example.test", 8080)][0]
        assert (rec["verdict"], rec["reason"]) == ("refused", "address-denied"), rec
    assert by[("ok.example.test", 22)][0]["reason"] == "port-not-listed"
    log = dom.log()
    assert "egress by name proved" in log, log


def test_status_and_no_sidecar(namedom, names):
    """A profile with names and no address runs without a sidecar (loopback
    only, like one that permits nothing) and status counts the broker's
    decisions. The broker, which parses what the sandbox sends, has none
    of the person's environment."""
    dom = namedom
    holder = dom.popen("run", "--", "/bin/sh", "-c", "sleep 60", env={"LAZARET_TEST_SECRET": "s3cret"})
    try:
        wait_sessions(dom, 1)
        [coord] = dom.coordinator_pids()
        assert b"LAZARET_TEST_SECRET=s3cret" in open(f"/proc/{coord}/environ", "rb").read()
        [broker] = [p for p in children(coord) if open(f"/proc/{p}/comm").read().strip() == "lazaret-broker"]
        assert open(f"/proc/{broker}/environ", "rb").read() == b"PATH=/usr/bin:/bin\0"
        r = dom.run("run", "--", "/bin/sh", "-c",
                    "wget -q -O - http://ok.example.test:8080/hello.txt; wget -q -O - http://x.example.test/ ; true")
        assert "hello by name" in r.stdout, r.stdout + r.stderr
        # The run's two connections, not the launch's probes (each line
        # reaches the coordinator a little after its connection ends).
        deadline = time.time() + 10
        while True:
            st = dom.status()
            eg = st["network"]["egress_by_name"]
            if (eg["allowed"], eg["refused"]) == (1, 1) or time.time() > deadline:
                break
            time.sleep(0.2)
        net = st["network"]
        assert net["mode"] == "loopback-only" and net.get("sidecar") is None, net
        assert eg["broker"] == "running" and eg["rules"] == [x for x in RULES], eg
        assert (eg["allowed"], eg["refused"]) == (1, 1), eg
        text = dom.run("status").stdout
        assert "rules through the broker (running)" in text, text
    finally:
        kill_cli(holder)
        holder.wait()


def test_preset_is_names_only_whatever_default_allow_says(lz, busybox_image, names):  # noqa: F811
    """Issue 41, item 6 (decision 20): a profile from an agent preset
    reaches its names through the broker and no address, even where the
    global default_allow reaches the test host directly; status says whose
    address rules hold. Said otherwise in the profile
    (inherit_default_allow = true), the global rule reaches it again: the
    direct connection is refused by the policy, not by chance."""
    net = (f'default_allow = ["198.51.100.232/29"]\ndefault_deny = []\nipv6 = "disabled"\n'
           f'resolvers = ["{HOST4}"]\nprobe_domains = ["ok.example.test:8080"]\n')
    script = (f"wget -q -O - http://ok.example.test:8080/hello.txt; echo ok=$?; "
              f"nc -w 2 {HOST4} 8080 </dev/null; echo direct=$?")
    for inherit in (None, "true"):
        extra = ('preset = "shell"\npersistent_dirs = []\nallow_domains = ["ok.example.test:8080"]\n'
                 + (f"inherit_default_allow = {inherit}\n" if inherit else ""))
        d = Domain(lz, busybox_image, network=net, extra=extra)
        try:
            before = len(accepts(names))
            holder = d.popen("run", "--", "/bin/sh", "-c", "sleep 60")
            try:
                wait_sessions(d, 1)
                st = d.status()["network"]
                text = d.run("status").stdout
                r = d.run("run", "--", "/bin/sh", "-c", script, timeout=180)
            finally:
                kill_cli(holder)
                holder.wait()
            assert r.returncode == 0, r.stderr + d.log()
            assert "hello by name\nok=0" in r.stdout, r.stdout + d.log()
            if inherit is None:
                assert st["mode"] == "loopback-only" and st.get("sidecar") is None, st
                assert st["address_rules"] == "own", st
                assert "addresses   the profile's own rules" in text, text
                assert "direct=0" not in r.stdout, r.stdout
                # Only the broker's connection reached the test host.
                assert len(accepts(names)) == before, accepts(names)[before:]
            else:
                assert st["mode"] == "sidecar" and st["address_rules"] == "global", st
                assert "addresses   the global rules" in text, text
                assert "direct=0" in r.stdout, r.stdout + d.log()
        finally:
            d.run("stop")
            gone(lz, d)


def test_debian_clients_by_name(lz, debian_image, names):  # noqa: F811
    """In the Debian image, unchanged clients reach a listed name through
    the relay with the proxy variables every session gets: curl (plain
    HTTP, CONNECT, SOCKS5 with names), Python's urllib, git over HTTP, and
    ssh through GIT_SSH_COMMAND's ProxyCommand: a git clone over SSH from
    an SSH server on the test host (git-upload-pack, the agent's key), and
    a connection to an echo host; each is refused for a name that is not
    listed."""
    key = open(os.path.join(names.ssh, "client")).read()
    lz.write("work/agent-ssh-key", key, mode=0o600)
    d = Domain(lz, debian_image,
               network=f'default_allow = []\ndefault_deny = []\nipv6 = "disabled"\nresolvers = ["{HOST4}"]\n',
               extra=f"allow_domains = {json.dumps(RULES)}\n")
    before = len(accepts(names))
    script = """
u=http://ok.example.test:8080/hello.txt; x=http://unlisted.example.test:8080/hello.txt
curl -sf $u; echo curl=$?
curl -sf -p $u; echo connect=$?
curl -sf -x socks5h://127.0.0.1:1080 $u; echo socks=$?
curl -sf $x; echo curl_unlisted=$?
curl -s -o /dev/null -w '%{http_connect}\\n' -p $x 2>/dev/null; echo connect_unlisted=$?
curl -sf -x socks5h://127.0.0.1:1080 $x; echo socks_unlisted=$?
python3 -c "import urllib.request,sys; sys.stdout.write(urllib.request.urlopen(sys.argv[1]).read().decode())" $u; echo py=$?
python3 -c "import urllib.request,sys; urllib.request.urlopen(sys.argv[1])" $x 2>/dev/null; echo py_unlisted=$?
git clone -q http://ok.example.test:8080/repo.git /tmp/r && cat /tmp/r/file.txt; echo git=$?
git clone -q http://unlisted.example.test:8080/repo.git /tmp/u 2>/dev/null; echo git_unlisted=$?
ssh_=(-o BatchMode=yes -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null -o ConnectTimeout=10 -p 9443)
eval "$GIT_SSH_COMMAND ${ssh_[*]} x@unlisted.example.test true" 2>&1 | grep -o 'refused: name-not-listed'
timeout 20 bash -c 'eval "$GIT_SSH_COMMAND $0"' "${ssh_[*]} x@ok.example.test true" >/tmp/ssh.out 2>&1
echo ssh_done; grep -c 'usage: ssh' /tmp/ssh.out
cp /workspace/agent-ssh-key /tmp/k && chmod 600 /tmp/k
GIT_SSH_COMMAND="$GIT_SSH_COMMAND -i /tmp/k -o BatchMode=yes -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null"
export GIT_SSH_COMMAND
timeout 60 git clone -q ssh://git@ok.example.test:2222/repo.git /tmp/s 2>/tmp/s.err && cat /tmp/s/file.txt; echo git_ssh=$?; sed 's/^/git_ssh stderr: /' /tmp/s.err
timeout 60 git clone -q ssh://git@unlisted.example.test:2222/repo.git /tmp/su 2>/dev/null; echo git_ssh_unlisted=$?
true
"""
    try:
        r = d.run("run", "--", "/bin/bash", "-c", script, timeout=240)
        assert r.returncode == 0, r.stderr + d.log()
        out = r.stdout
        for ok in ("curl", "connect", "socks", "py", "git"):
            assert f"{ok}=0" in out, out
        # The test hosts' log and the broker's record say why, should a
        # clone fail.
        why = out + open(names.log).read() + d.log()
        assert out.count("hello by name\n") == 4 and out.count("cloned by name\n") == 2, why
        assert "git_ssh=0" in out and "git_ssh_unlisted=0" not in out, why
        # The clone went over SSH to the test host: its server ran
        # git-upload-pack for the agent's key.
        assert "ssh-exec git-upload-pack /repo.git" in open(names.log).read()
        for bad in ("curl_unlisted", "socks_unlisted", "py_unlisted", "git_unlisted"):
            assert f"{bad}=0" not in out, out
        assert "403\nconnect_unlisted" in out, out
        assert "refused: name-not-listed" in out and "ssh_done\n0\n" in out, out
        # ssh reached the echo host through the ProxyCommand: its banner
        # went there (and came back).
        deadline = time.time() + 10
        while True:
            log = open(names.log).read().splitlines()
            closes = [x for x in log if x.startswith("close ")]
            if any(int(x.split()[-1]) > 0 for x in closes) or time.time() > deadline:
                break
            time.sleep(0.1)
        assert any(int(x.split()[-1]) > 0 for x in closes), log
        assert len(accepts(names)) > before, out
    finally:
        gone(lz, d)


def test_node_clients_by_name(lz, node_image, names):  # noqa: F811
    """In the node image, Node.js's own fetch reaches a listed name through
    the relay (NODE_USE_ENV_PROXY, which every session gets) and is refused
    for a name not listed; npm installs a package from a listed name."""
    image, version = node_image
    d = Domain(lz, image,
               network=f'default_allow = []\ndefault_deny = []\nipv6 = "disabled"\nresolvers = ["{HOST4}"]\n',
               extra=f"allow_domains = {json.dumps(RULES)}\n")
    script = """
u=http://ok.example.test:8080/hello.txt; x=http://unlisted.example.test:8080/hello.txt
node --version
echo "proxy=$NODE_USE_ENV_PROXY"
f='fetch(process.argv[1]).then(r => { if (!r.ok) throw new Error("status " + r.status); return r.text(); })
   .then(t => process.stdout.write(t), e => { console.log("failed:", String(e.cause || e)); process.exitCode = 3; })'
node -e "$f" $u; echo fetch=$?
node -e "$f" $x; echo fetch_unlisted=$?
env -u NODE_USE_ENV_PROXY node -e "$f" $u; echo fetch_without_proxy=$?
cd /tmp && timeout 120 npm install --no-audit --no-fund --registry http://ok.example.test:8080/ \
    http://ok.example.test:8080/byname-1.0.0.tgz >/tmp/npm.out 2>&1; echo npm=$?
node -e "console.log(require('/tmp/node_modules/byname'))"
timeout 120 npm install --no-audit --no-fund --registry http://ok.example.test:8080/ \
    http://unlisted.example.test:8080/byname-1.0.0.tgz >/dev/null 2>&1; echo npm_unlisted=$?
true
"""
    try:
        r = d.run("run", "--", "/bin/bash", "-c", script, timeout=300)
        assert r.returncode == 0, r.stderr + d.log()
        out = r.stdout
        assert f"v{version}\n" in out and "proxy=1\n" in out, out
        assert "hello by name\nfetch=0\n" in out, out
        assert "fetch_unlisted=3" in out and "fetch_without_proxy=3" in out, out
        assert "npm=0\ninstalled by name\n" in out, out
        assert "npm_unlisted=0" not in out, out
    finally:
        gone(lz, d)


def test_ca_certificates_reach_the_clients(lz, node_image, names):  # noqa: F811
    """ca_certificates = ["host", FILE] (issue 24): curl, Python, Node.js
    and git inside trust an HTTPS host whose certificate comes from the
    test's own authority, through the relay; the bundle is read-only and
    holds the host's store and that certificate; without the key the same
    clients refuse the host. A file with a private key in it stops the
    launch, naming it, and leaves nothing."""
    image, _ = node_image
    ca = os.path.join(names.tls, "ca.pem")
    net = f'default_allow = []\ndefault_deny = []\nipv6 = "disabled"\nresolvers = ["{HOST4}"]\n'
    # A file that holds a key beside the certificate.
    both = lz.write("key-and-ca.pem", open(ca).read() + open(os.path.join(names.tls, "host.key")).read())
    extra = f'allow_domains = {json.dumps(RULES)}\nca_certificates = ["host", "{ca}"]\n' + f"""
[profiles.plain]
image = "{image}"
allow_domains = {json.dumps(RULES)}
[profiles.keyed]
image = "{image}"
ca_certificates = ["{both}"]
"""
    d = Domain(lz, image, network=net, extra=extra)
    script = r"""
u=https://ok.example.test:8443/hello.txt
curl -sf $u; echo curl=$?
python3 -c "import urllib.request,sys; sys.stdout.write(urllib.request.urlopen(sys.argv[1]).read().decode())" $u
echo py=$?
node -e 'fetch(process.argv[1]).then(r => r.text()).then(t => process.stdout.write(t), e => {
  console.log("failed:", String(e.cause || e)); process.exitCode = 3; })' $u; echo node=$?
git clone -q https://ok.example.test:8443/repo.git /tmp/r && cat /tmp/r/file.txt; echo git=$?
echo "env=$SSL_CERT_FILE $NODE_EXTRA_CA_CERTS $REQUESTS_CA_BUNDLE $GIT_SSL_CAINFO"
grep -c 'BEGIN CERTIFICATE' /run/lazaret/ca-certificates.crt
echo x >> /run/lazaret/ca-certificates.crt 2>/dev/null; echo write=$?
true
"""
    try:
        r = d.run("run", "shell", "--", "/bin/bash", "-c", script, timeout=300)
        assert r.returncode == 0, r.stderr + d.log()
        out = r.stdout
        for ok in ("curl", "py", "node", "git"):
            assert f"{ok}=0" in out, out
        assert out.count("hello by name\n") == 3 and "cloned by name\n" in out, out
        b = "/run/lazaret/ca-certificates.crt"
        assert f"env={b} {b} {b} {b}\n" in out, out
        host = open("/etc/ssl/certs/ca-certificates.crt").read().count("BEGIN CERTIFICATE")
        assert f"\n{host + 1}\nwrite=" in out and "write=0" not in out, out

        # The same clients without the authority refuse the host.
        r = d.run("run", "plain", "--", "/bin/bash", "-c", script, timeout=300)
        assert r.returncode == 0, r.stderr + d.log()
        for bad in ("curl", "py", "node", "git"):
            assert f"{bad}=0" not in r.stdout, r.stdout
        assert "hello by name" not in r.stdout and "env=   \n" in r.stdout, r.stdout

        # A file that holds a key is no certificate file: nothing starts.
        deadline = time.time() + 60
        while d.container_names() and time.time() < deadline:
            time.sleep(0.2)  # the last sandbox going away
        before = sorted(d.domain_dirs())
        r = d.run("run", "keyed", "--", "/bin/true", timeout=120)
        assert r.returncode != 0, r.stderr
        assert (f"profiles.keyed.ca_certificates: {both} holds a PRIVATE KEY block: a certificate file for the "
                "sandbox holds certificates only (never a key)") in r.stderr, r.stderr
        assert sorted(d.domain_dirs()) == before and d.container_names() == []
    finally:
        gone(lz, d)


def test_kube_egress_pod_runs_under_podman(lz, debian_image, names):  # noqa: F811
    """lazaret kube for a profile with names (issue 23): the egress pod it
    writes (the broker and the relay from `lazaret image build broker`,
    their ConfigMap) runs under `podman kube play`; a client on
    the host's loopback (the pod's ports published there) reaches a listed
    name through the relay, and an unlisted one, a listed name on another
    port and a name that resolves to a private address are refused by the
    broker, which writes each decision to its standard output. (A cluster
    would also hold the NetworkPolicies, which Podman does not enforce.)"""
    env = {"HOME": lz.user.pw_dir}
    r = lz.run("image", "build", "broker", env=env, timeout=300)
    assert r.returncode == 0, r.stderr
    cfg = lz.write("kube-egress.toml", f"""[storage]
data_root = "{lz.base}/data"
[network]
default_allow = []
default_deny = []
resolvers = ["{HOST4}"]
[escalation]
enabled = false
socket_dir = "{lz.base}/sock"
[profiles.pp]
image = "{debian_image}"
allow_domains = ["ok.example.test:8080", "private.example.test:8080"]
""")
    out = os.path.join(lz.base, "kube-out")
    os.makedirs(out)
    os.chown(out, lz.user.pw_uid, lz.user.pw_gid)
    r = lz.run("--config", cfg, "kube", "pp", "--output", out, env=env)
    assert r.returncode == 0, r.stderr
    assert "the broker's image localhost/lazaret/broker:latest@sha256:" in r.stderr and "is this host's own" in r.stderr
    files = sorted(os.listdir(out))
    cm = [f for f in files if f.startswith("configmap-")]
    pod = [f for f in files if f.startswith("pod-") and f.endswith("-egress.yaml")]
    assert len(cm) == 1 and len(pod) == 1, files
    # The manifests as they are, but for a host port on each of the relay's
    # ports (the test reaches the pod from the host's loopback, as the
    # agent's pod reaches it through its Service on a cluster) and without
    # the containers' resources (rootless Podman on this host's cgroup v1
    # cannot set memory limits; on a cluster they are the kubelet's).
    # Podman runs its own runtime whatever the RuntimeClass says.
    docs = list(yaml.safe_load_all(open(os.path.join(out, cm[0])).read() + open(os.path.join(out, pod[0])).read()))
    ports = {}
    for d in docs:
        for c in d.get("spec", {}).get("containers", []):
            assert c.pop("resources")["limits"]["memory"] == "256Mi", c
            for p in c.get("ports", []):
                with socket.socket() as s:
                    s.bind(("127.0.0.1", 0))
                    ports[p["name"]] = p["hostPort"] = s.getsockname()[1]
                p["hostIP"] = "127.0.0.1"
    play = lz.write("egress-play.yaml", yaml.safe_dump_all(docs))
    name = pod[0][len("pod-"):-len(".yaml")]
    try:
        r = podman(lz.user, "kube", "play", play, check=False)
        assert r.returncode == 0, r.stdout + r.stderr
        http, socks = f"http://127.0.0.1:{ports['http']}", f"socks5h://127.0.0.1:{ports['socks']}"
        script = f"""
u=http://ok.example.test:8080/hello.txt
for i in $(seq 100); do curl -s -o /dev/null -x {http} $u && break; sleep 0.2; done
curl -sf -x {http} $u; echo listed=$?
curl -s -o /dev/null -w '%{{http_code}}\\n' -x {http} http://unlisted.example.test:8080/hello.txt
curl -s -o /dev/null -w '%{{http_code}}\\n' -x {http} http://ok.example.test:9443/
curl -s -o /dev/null -w '%{{http_code}}\\n' -x {http} http://private.example.test:8080/
curl -sf -x {socks} $u; echo socks=$?
"""
        r = subprocess.run(["/bin/bash", "-c", script], capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, r.stdout + r.stderr
        assert r.stdout.splitlines() == ["hello by name", "listed=0", "403", "403", "403", "hello by name",
                                         "socks=0"], r.stdout + r.stderr
        # The broker's decisions on its standard output, one JSON line each.
        logs = podman(lz.user, "logs", f"{name}-broker", check=False).stdout
        recs = [json.loads(x) for x in logs.splitlines() if x.startswith("{")]
        assert any(x.get("verdict") == "allowed" and x.get("name") == "ok.example.test" for x in recs), logs
        assert any(x.get("verdict") == "refused" and x.get("host") == "unlisted.example.test" for x in recs), logs
    finally:
        podman(lz.user, "kube", "down", play, check=False)


def test_other_domains_broker_is_out_of_reach(lz, busybox_image, names):  # noqa: F811
    """Two Domains with names: each sandbox reaches only its own broker
    (through its dispenser; no host socket is reachable), and the other
    Domain's rules never apply to it."""
    other = f"""
[profiles.other]
image = "{busybox_image}"
allow_domains = ["ok.example.test:9443"]
"""
    d = Domain(lz, busybox_image,
               network=f'default_allow = []\ndefault_deny = []\nipv6 = "disabled"\nresolvers = ["{HOST4}"]\n',
               extra='allow_domains = ["ok.example.test:8080"]\n' + other)
    holder = d.popen("run", "shell", "--", "/bin/sh", "-c", "sleep 60")
    try:
        deadline = time.time() + 60
        while time.time() < deadline and not glob.glob(f"/tmp/lazaret-{lz.user.pw_uid}/lazaret_broker_*/sock"):
            time.sleep(0.1)
        [mine] = glob.glob(f"/tmp/lazaret-{lz.user.pw_uid}/lazaret_broker_*/sock")
        r = d.run("run", "other", "--", "/bin/sh", "-c", f"""
ls -A /run/lazaret/dispense
[ -e {mine} ]; echo "seen=$?"
ls /tmp/lazaret-{lz.user.pw_uid} 2>/dev/null; echo "dir=$?"
/run/lazaret/relay --probe ok.example.test 8080
/run/lazaret/relay --probe ok.example.test 9443
""", timeout=120)
        assert r.returncode == 0, r.stderr + d.log()
        lines = r.stdout.splitlines()
        assert lines[0] == "broker", r.stdout
        assert "seen=1" in lines and "dir=1" in lines, r.stdout
        assert any(x.startswith("refused port-not-listed") for x in lines), r.stdout
        assert any(x.startswith("ok ") for x in lines), r.stdout
    finally:
        kill_cli(holder)
        holder.wait()
        gone(lz, d)


def test_rootful_names(lazaret_bin, names, tmp_path):
    """Lazaret run by root (root's Podman): the same path, the broker a
    process of root's on the host."""
    from test_network import ROOT_ENV, rootful_domain
    data, work, cfg = rootful_domain(lazaret_bin, tmp_path, [], extra=f'resolvers = ["{HOST4}"]\n',
                                     extra_profile=f"allow_domains = {json.dumps(RULES)}\n")
    r = subprocess.run([lazaret_bin, "--config", str(cfg), "run", "--", "/bin/sh", "-c",
                        "wget -q -O - http://ok.example.test:8080/hello.txt; echo ok=$?; "
                        "wget -q -O - http://private.example.test:8080/hello.txt; echo private=$?"],
                       capture_output=True, text=True, env=ROOT_ENV, cwd=work, timeout=180)
    assert r.returncode == 0, r.stderr
    assert "hello by name\nok=0" in r.stdout and "private=1" in r.stdout, r.stdout + r.stderr
    h = os.listdir(data / "domains")[0]

    def run_root(*args):
        return subprocess.run([lazaret_bin, "--config", str(cfg)] + list(args), capture_output=True, text=True,
                              env=ROOT_ENV, cwd=work, timeout=60)
    records = egress_records(run_root, lambda recs: any(x["reason"] == "address-denied" for x in recs))
    assert any(x["reason"] == "address-denied" for x in records), records
    deadline = time.time() + 15
    while True:
        names_ = subprocess.run(["podman", "ps", "-a", "--format", "{{.Names}}"], capture_output=True,
                                text=True).stdout.split()
        left = [n for n in names_ if n.endswith(h)]
        if not left or time.time() > deadline:
            break
        time.sleep(0.2)
    assert left == []


def test_narrower_policy_reaches_the_broker(namedom, names):
    """A CLI that joins with a policy that denies the listed name's address
    (a narrowing while the sandbox runs): the broker takes it, and the name
    is refused from then on."""
    dom = namedom
    holder = dom.popen("run", "--", "/bin/sh", "-c", "sleep 60")
    try:
        wait_sessions(dom, 1)
        r = dom.run("run", "--", "/bin/sh", "-c", "wget -q -O - http://ok.example.test:8080/hello.txt")
        assert r.stdout == "hello by name\n", r.stdout + r.stderr
        cfg = open(dom.cfg).read()
        dom.lz.write("cfg.toml", cfg.replace("default_deny = []", f'default_deny = ["{HOST4}/32"]'))
        r = dom.run("run", "--", "/bin/sh", "-c", "wget -q -O - http://ok.example.test:8080/hello.txt; echo rc=$?")
        assert r.returncode == 0, r.stderr + dom.log()
        assert "hello by name" not in r.stdout and "rc=1" in r.stdout, r.stdout
        assert "the broker takes the new policy" in dom.log(), dom.log()
        records = egress_records(dom.run, lambda recs: recs and recs[-1]["reason"] == "address-denied")
        last = records[-1]
        assert (last["name"], last["reason"]) == ("ok.example.test", "address-denied"), last
        assert holder.poll() is None
    finally:
        kill_cli(holder)
        holder.wait()


@pytest.mark.parametrize("addresses", [False, True], ids=["names-only", "with-address-rules"])
def test_native_backend_names(lz, names, addresses):
    """The native backend (issue 21) reaches names the same way: the relay
    on the sandbox's own loopback (kept running by lazaret-init, joined in
    by the coordinator) hands each request to the broker's socket; a listed
    name answers, an unlisted one and a direct connection do not; the agent
    cannot kill the relay (another Landlock domain: signals scoped). With
    address rules too (issue 45) the sandbox runs in the network sidecar's
    namespace: names still go through the relay and the broker, and the
    one permitted address is reached directly."""
    rules = json.dumps(RULES)
    allow = f'["{HOST4}/32"]\nprobe_targets = ["{HOST4}:8080"]' if addresses else "[]"
    d = Domain(lz, "localhost/lazaret/unused:1",
               network=f'default_allow = {allow}\ndefault_deny = []\nipv6 = "disabled"\nresolvers = ["{HOST4}"]\n'
                       f'probe_domains = ["ok.example.test:8080"]\n',
               extra=f'backend = "native"\nmemory_limit = 0\nallow_domains = {rules}\n')
    lz.write("work/get.py", f"""
import os, signal, socket, urllib.request
def get(url):
    try:
        return urllib.request.urlopen(url, timeout=20).read().decode()
    except Exception as e:
        return "ERR " + type(e).__name__
print("proxy", os.environ.get("http_proxy"))
print("ok", get("http://ok.example.test:8080/hello.txt").strip())
print("unlisted", get("http://unlisted.example.test:8080/hello.txt").strip())
s = socket.socket()
s.settimeout(3)
try:
    s.connect(("{HOST4}", 8080))
    print("direct OK")
except OSError as e:
    print("direct", e.errno)
relay = [p for p in os.listdir("/proc") if p.isdigit() and open(f"/proc/{{p}}/comm").read().strip() == "relay"]
try:
    os.kill(int(relay[0]), signal.SIGKILL)
    print("kill OK")
except OSError as e:
    print("kill", e.errno)
""")
    before = len(accepts(names))
    r = d.run("run", "--tui=none", "--", "/usr/bin/python3", "get.py", timeout=120)
    assert r.returncode == 0, r.stderr + d.log()
    out = dict(line.split(" ", 1) for line in r.stdout.splitlines())
    assert out["proxy"] == "http://127.0.0.1:3128", out
    assert out["ok"] == "hello by name", out
    assert out["unlisted"].startswith("ERR"), out
    # An address rule holds for the address; names go by the broker alone.
    assert (out["direct"] == "OK") == addresses, out
    assert out["kill"] == "1", "the agent must not kill the relay (EPERM): " + r.stdout
    got = accepts(names)[before:]
    assert len(got) == 0, got  # HTTP only: the echo server saw nothing
    assert "egress by name proved" in d.log(), d.log()
    assert ("network readiness proved" in d.log()) == addresses, d.log()
    st = d.run("run", "--tui=none", "--", "/bin/true")
    assert st.returncode == 0, st.stderr
