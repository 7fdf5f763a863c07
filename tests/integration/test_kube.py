# SPDX-License-Identifier: MIT
"""lazaret kube PROFILE (issue 23): a profile as Kubernetes manifests for one
agent Domain, run as the test user. Golden manifests for each profile of
example.toml (pinned by digest, as the file tells the reader to), validated
offline by kubernetes-validate against Kubernetes' OpenAPI schemas (scripts/
setup.sh installs it from PyPI); the NetworkPolicy's address set equals the
Derived Network Policy's, computed here independently (longest prefix wins)
over generated policies; refusals; nothing of a secret's value on the page."""
import ipaddress
import json
import os
import stat
import random
import re
import shutil
import subprocess

import pytest
import yaml

from test_run import busybox_image  # noqa: F401  (fixture)

HERE = os.path.dirname(os.path.abspath(__file__))
EXAMPLE = os.path.join(HERE, "..", "..", "example.toml")
GOLDEN = os.path.join(HERE, "..", "data", "kube")
DIGEST = "@sha256:" + "0123456789abcdef" * 4
VALIDATE = shutil.which("kubernetes-validate", path="/usr/local/bin:/usr/bin:/bin")


def example_config(lz):
    """example.toml with each image pinned (as its comment says to do once
    pulled) and the data root and socket directory under the test's base."""
    text = open(EXAMPLE, encoding="utf-8").read()
    text = re.sub(r'^(image = "[^"@]*)"', lambda m: m.group(1) + DIGEST + '"', text, flags=re.M)
    text = text.replace("~/.local/share/lazaret", os.path.join(lz.base, "data"))
    text = text.replace("~/.cache/lazaret/sockets", os.path.join(lz.base, "sock"))
    return lz.write("example.toml", text)


def normalise(lz, text):
    """What differs from one test run to the next: the base directory and
    the Domain's hash (of the workspace's path)."""
    text = text.replace(lz.base, "BASE")
    # (quoted where it begins with a digit)
    return re.sub(r"\"?\b[0-9a-f]{12}\b\"?", "DOMAINHASH", text)


def need_validate():
    if not VALIDATE:
        pytest.fail("kubernetes-validate is not installed: scripts/setup.sh --test-user installs it from PyPI")


@pytest.mark.parametrize("profile", ["claude", "codex", "aider", "shell"])
def test_kube_golden_for_each_example_profile(lz, profile):
    cfg = example_config(lz)
    r = lz.run("--config", cfg, "kube", profile)
    assert r.returncode == 0, r.stderr
    got = normalise(lz, r.stdout)
    path = os.path.join(GOLDEN, f"{profile}.yaml")
    if os.environ.get("LAZARET_KUBE_GOLDEN_WRITE"):
        with open(path, "w", encoding="utf-8") as f:
            f.write(got)
    want = open(path, encoding="utf-8").read()
    assert got == want, f"lazaret kube {profile} differs from {path} (LAZARET_KUBE_GOLDEN_WRITE=1 rewrites it)"
    docs = [d for d in yaml.safe_load_all(r.stdout) if d is not None]
    workload = docs[0]
    assert workload["kind"] == "Pod", workload
    spec = workload["spec"]
    assert spec["runtimeClassName"] == "gvisor" and spec["automountServiceAccountToken"] is False
    assert not spec["hostNetwork"] and not spec["hostPID"] and not spec["hostIPC"]
    for c in spec["containers"] + spec.get("initContainers", []):
        sc = c["securityContext"]
        assert sc["allowPrivilegeEscalation"] is False and sc["capabilities"] == {"drop": ["ALL"]}, c
        assert c["image"].endswith(DIGEST), c["image"]
    kinds = sorted(d["kind"] for d in docs)
    assert kinds.count("NetworkPolicy") == 1 and "Secret" not in kinds, kinds
    # Validated offline against the Kubernetes OpenAPI schemas.
    need_validate()
    out = os.path.join(lz.base, "out")
    os.makedirs(out, exist_ok=True)
    os.chown(out, lz.user.pw_uid, lz.user.pw_gid)
    r = lz.run("--config", cfg, "kube", profile, "--output", out, "--check")
    assert r.returncode == 0 and "manifests valid" in r.stderr, r.stdout + r.stderr
    assert sorted(os.listdir(out)) == sorted(os.path.basename(p) for p in r.stdout.split()), r.stdout


def test_kube_check_fails_on_what_the_schema_refuses(lz):
    """--check can fail: a file the schema refuses (a misspelt field) is
    what kubernetes-validate --strict is given the same way."""
    need_validate()
    bad = lz.write("bad.yaml", "apiVersion: v1\nkind: Pod\nmetadata:\n  name: x\nspec:\n  runtimeClasName: gvisor\n"
                               "  containers:\n  - name: a\n    image: b\n")
    r = subprocess.run([VALIDATE, "--strict", "--quiet", bad], capture_output=True, text=True)
    assert r.returncode != 0 and "runtimeClasName" in r.stdout + r.stderr, r.stdout + r.stderr


def test_kube_check_exits_1_when_the_validator_refuses(lz):
    """lazaret kube --check fails with the validator: the real
    kubernetes-validate, handed a misspelt manifest beside ours by a
    wrapper first on PATH, refuses; lazaret exits 1 and says so."""
    need_validate()
    bad = lz.write("bad.yaml", "apiVersion: v1\nkind: Pod\nmetadata:\n  name: x\nspec:\n  runtimeClasName: gvisor\n"
                               "  containers:\n  - name: a\n    image: b\n")
    lz.write("shim/kubernetes-validate", f'#!/bin/sh\nexec {VALIDATE} "$@" {bad}\n', mode=0o755)
    os.chmod(os.path.join(lz.base, "shim", "kubernetes-validate"), 0o755)
    cfg = example_config(lz)
    path = os.path.join(lz.base, "shim") + ":/usr/local/bin:/usr/bin:/bin"
    r = lz.run("--config", cfg, "kube", "claude", "--check", env={"PATH": path})
    assert r.returncode == 1, r.stdout + r.stderr
    assert "runtimeClasName" in r.stdout + r.stderr and "do not pass kubernetes-validate" in r.stderr, r.stderr
    # Without the misspelt one, the same run passes.
    r = lz.run("--config", cfg, "kube", "claude", "--check")
    assert r.returncode == 0 and "manifests valid" in r.stderr, r.stderr


def test_kube_check_without_the_validator_prints_nothing(lz):
    """Issue 42: without kubernetes-validate, --check printed the whole YAML
    and then the error, whose install line (pip install) Debian 12 refuses.
    Now one error before anything, naming an install that works there."""
    cfg = example_config(lz)
    r = lz.run("--config", cfg, "kube", "claude", "--check", env={"PATH": "/usr/bin:/bin"})
    assert r.returncode == 125 and r.stdout == "", r.stdout
    assert "pipx install kubernetes-validate" in r.stderr and "nothing was written" in r.stderr, r.stderr


def test_kube_warns_about_rootless_podmans_resolver(lz):
    """Issue 42: the starter's resolver on a rootless host, slirp4netns's
    10.0.2.3, went into the pod's dnsConfig without a word."""
    cfg = config_with(lz, 'default_allow = ["192.0.2.0/24", "10.0.2.3/32"]\ndefault_deny = []\nresolvers = ["10.0.2.3"]')
    r = lz.run("--config", cfg, "kube", "pp")
    assert r.returncode == 0, r.stderr
    assert "the resolver 10.0.2.3 is rootless Podman's own" in r.stderr, r.stderr
    cfg = config_with(lz, 'default_allow = ["192.0.2.0/24"]\ndefault_deny = []\nresolvers = ["192.0.2.53"]',
                      name="k2.toml")
    r = lz.run("--config", cfg, "kube", "pp")
    assert r.returncode == 0 and "rootless Podman's own" not in r.stderr, r.stderr


def test_kube_output_is_every_file_or_none(lz):
    """--output writes every manifest or none: where the second file cannot
    take its place (a directory of its name), the first is not written
    either and no temporary file is left."""
    cfg = example_config(lz)
    out = os.path.join(lz.base, "out2")
    os.makedirs(out)
    os.chown(out, lz.user.pw_uid, lz.user.pw_gid)
    r = lz.run("--config", cfg, "kube", "claude", "--output", out)
    assert r.returncode == 0, r.stderr
    names = [os.path.basename(p) for p in r.stdout.split()]
    assert len(names) >= 2, names
    for n in names:
        os.unlink(os.path.join(out, n))
    os.mkdir(os.path.join(out, names[1]))
    r = lz.run("--config", cfg, "kube", "claude", "--output", out)
    assert r.returncode != 0 and f"--output {out}: {names[1]} is already there (a directory)" in r.stderr, r.stderr
    assert "nothing was written" in r.stderr and r.stdout == "", r.stdout + r.stderr
    assert os.listdir(out) == [names[1]], os.listdir(out)


def test_kube_output_is_written_as_report_output_writes(lz):
    """Issue 41, item 5: --output DIR writes through the one safe writer of
    report --output: new files 0600, never through a symbolic link on DIR's
    path or one planted with a manifest's name, never over a file without
    --force; --force replaces the user's own files, still not a link."""
    cfg = example_config(lz)
    out = os.path.join(lz.base, "out3")
    os.makedirs(out)
    os.chown(out, lz.user.pw_uid, lz.user.pw_gid)
    secret = os.path.join(lz.base, "secret.yaml")
    with open(secret, "w") as f:
        f.write("keep\n")
    os.chown(secret, lz.user.pw_uid, lz.user.pw_gid)
    link = os.path.join(lz.base, "out-link")
    os.symlink(out, link)
    r = lz.run("--config", cfg, "kube", "claude", "--output", link)
    assert r.returncode == 64 and "out-link is a symbolic link" in r.stderr, r.stderr
    assert os.listdir(out) == []
    r = lz.run("--config", cfg, "kube", "claude", "--output", out)
    assert r.returncode == 0, r.stderr
    names = sorted(os.path.basename(p) for p in r.stdout.split())
    assert sorted(os.listdir(out)) == names
    for n in names:
        st = os.lstat(os.path.join(out, n))
        assert stat.S_ISREG(st.st_mode) and stat.S_IMODE(st.st_mode) == 0o600, (n, oct(st.st_mode))
    before = {n: open(os.path.join(out, n)).read() for n in names}
    r = lz.run("--config", cfg, "kube", "claude", "--output", out, "--namespace", "other")
    assert r.returncode != 0 and "is already there (a file)" in r.stderr, r.stderr
    assert {n: open(os.path.join(out, n)).read() for n in names} == before
    assert sorted(os.listdir(out)) == names, os.listdir(out)
    r = lz.run("--config", cfg, "kube", "claude", "--output", out, "--namespace", "other", "--force")
    assert r.returncode == 0, r.stderr
    assert all("namespace: other" in open(os.path.join(out, n)).read() for n in names)
    # A link planted with a manifest's name: refused even with --force, and
    # what it points at is unchanged.
    os.unlink(os.path.join(out, names[0]))
    os.symlink(secret, os.path.join(out, names[0]))
    r = lz.run("--config", cfg, "kube", "claude", "--output", out, "--force")
    assert r.returncode != 0 and "a symbolic link, not a file of yours" in r.stderr, r.stderr
    assert open(secret).read() == "keep\n"
    assert sorted(os.listdir(out)) == names and not any(n.startswith(".") for n in os.listdir(out))


def test_kube_image_user_cannot_write_to_the_terminal(lz, busybox_image):  # noqa: F811
    """An image's USER is the image's text: a name full of terminal escapes
    is shown escaped in the warning, never as escapes."""
    ctx = os.path.join(lz.base, "ctx")
    lz.write("ctx/Containerfile", f"FROM {busybox_image}\nUSER \x1b[2Jx\x1b]0;owned\x07\n")
    tag = "localhost/lazaret-test/baduser:1"
    podman = ["runuser", "-u", lz.user.pw_name, "--", "env", "-i", f"HOME={lz.user.pw_dir}",
              "PATH=/usr/bin:/bin", "podman"]
    r = subprocess.run(podman + ["build", "-q", "-t", tag, ctx], capture_output=True, text=True, timeout=300, cwd="/")
    assert r.returncode == 0, r.stderr
    try:
        cfg = config_with(lz, NONE, image=tag)
        r = lz.run("--config", cfg, "kube", "pp", env={"HOME": lz.user.pw_dir})
        assert r.returncode == 0, r.stderr
        assert "\x1b" not in r.stderr and "\x07" not in r.stderr, repr(r.stderr)
        assert "the image's user '\\x1b[2Jx\\x1b]0;owned\\x07' is a name" in r.stderr, r.stderr
        assert "\x1b" not in r.stdout and "runAsNonRoot: true" not in r.stdout, r.stdout
    finally:
        subprocess.run(podman + ["rmi", "-f", tag], capture_output=True, timeout=120, cwd="/")


def test_kube_secrets_are_references_never_values(lz):
    cfg = example_config(lz)
    r = lz.run("--config", cfg, "kube", "claude", env={"ANTHROPIC_API_KEY": "sk-very-secret-value"})
    assert r.returncode == 0, r.stderr
    assert "sk-very-secret-value" not in r.stdout + r.stderr
    pod = next(yaml.safe_load_all(r.stdout))
    env = {e["name"]: e for e in pod["spec"]["containers"][0]["env"]}
    ref = env["ANTHROPIC_API_KEY"]["valueFrom"]["secretKeyRef"]
    assert ref["key"] == "ANTHROPIC_API_KEY" and ref["name"].endswith("-env"), ref
    assert env["EDITOR"]["value"] == "vi"
    assert f"kubectl create secret generic {ref['name']} --from-literal=ANTHROPIC_API_KEY=..." in r.stderr


def config_with(lz, network, profile_extra="", image="docker.io/library/debian:12" + DIGEST, name="k.toml"):
    return lz.write(name, f"""[storage]
data_root = "{lz.base}/data"
[network]
{network}
[escalation]
enabled = false
socket_dir = "{lz.base}/sock"
[profiles.pp]
image = "{image}"
{profile_extra}""")


NONE = "default_allow = []\ndefault_deny = []"


def test_kube_refusals_leave_nothing(lz):
    out = os.path.join(lz.base, "out")
    os.makedirs(out, exist_ok=True)
    os.chown(out, lz.user.pw_uid, lz.user.pw_gid)
    cases = [
        # Refused for what it is even where the image is not pinned.
        (config_with(lz, NONE, 'runsc_network = "host"', image="localhost/lazaret/nosuch:1", name="k1.toml"), 65,
         'runsc_network = "host"'),
        # Names need the broker's image, which the test user's store lacks.
        (config_with(lz, NONE, 'allow_domains = ["api.example.com"]', name="k2.toml"), 65,
         "lists names (allow_domains): the broker's image localhost/lazaret/broker:latest is not pinned by digest "
         "and not in Podman's store: build it (lazaret image build broker)"),
        (config_with(lz, NONE, image="localhost/lazaret/nosuch:1", name="k3.toml"), 65,
         "not pinned by digest and not in Podman's store"),
    ]
    for cfg, status, why in cases:
        r = lz.run("--config", cfg, "kube", "pp", "--output", out)
        assert r.returncode == status and why in r.stderr, (why, r.stdout, r.stderr)
        assert os.listdir(out) == [], os.listdir(out)
    cfg = config_with(lz, NONE)
    for args, why in ((["--namespace", "Bad_NS"], "--namespace Bad_NS"), (["--output", "/nonexistent"], "--output"),
                      (["--"], "-- takes the Job's command")):
        r = lz.run("--config", cfg, "kube", "pp", *args)
        assert r.returncode == 64 and why in r.stderr, r.stderr


def test_kube_job_from_the_local_store(lz, busybox_image):  # noqa: F811
    """A command after -- makes a Job; an image that is not pinned is pinned
    from Podman's store (the test user's), with its user; --namespace is
    on every object."""
    cfg = config_with(lz, 'default_allow = ["198.51.100.0/24"]\ndefault_deny = []', image=busybox_image)
    r = lz.run("--config", cfg, "kube", "pp", "--namespace", "agents", "--", "sh", "-c", "echo hi",
               env={"HOME": lz.user.pw_dir})
    assert r.returncode == 0, r.stderr
    docs = [d for d in yaml.safe_load_all(r.stdout) if d]
    job = docs[0]
    assert job["kind"] == "Job" and job["spec"]["backoffLimit"] == 0, job
    c = job["spec"]["template"]["spec"]["containers"][0]
    assert c["command"] == ["sh", "-c", "echo hi"] and "tty" not in c, c
    assert re.fullmatch(re.escape(busybox_image) + r"@sha256:[0-9a-f]{64}", c["image"]), c["image"]
    assert "the image runs as root" in r.stderr, r.stderr
    assert all(d["metadata"]["namespace"] == "agents" for d in docs), docs
    if VALIDATE:
        r = lz.run("--config", cfg, "kube", "pp", "--check", "--", "true", env={"HOME": lz.user.pw_dir})
        assert r.returncode == 0, r.stderr


# ---------------------------------------------------------- the oracle

def segments_equal(rules, default, blocks, bits):
    """Whether the blocks (cidr less except) allow exactly what the rules
    do, longest prefix winning, default elsewhere: over every elementary
    segment between the boundaries of both."""
    size = 1 << bits
    cuts = {0, size}
    for net, _ in rules:
        cuts |= {int(net.network_address), int(net.network_address) + net.num_addresses}
    for cidr, excepts in blocks:
        for n in [cidr] + excepts:
            cuts |= {int(n.network_address), int(n.network_address) + n.num_addresses}
    cuts = sorted(cuts)

    def inside(n, a):
        return int(n.network_address) <= a < int(n.network_address) + n.num_addresses

    for a in cuts[:-1]:
        best, verdict = -1, default
        for net, action in rules:
            if inside(net, a) and net.prefixlen > best:
                best, verdict = net.prefixlen, action
        got = any(inside(c, a) and not any(inside(e, a) for e in ex) for c, ex in blocks)
        if got != (verdict == "allow"):
            return a
    return None


def random_prefixes(rng, bits, n):
    seen = {}
    while len(seen) < n:
        length = rng.choice([0, 1, 2, 4, 8, 8, 12, 16, 16, 20, 24, 24, 28, bits])
        addr = rng.getrandbits(bits) >> (bits - length) << (bits - length) if length else 0
        net = ipaddress.ip_network((addr, length)) if bits == 32 else ipaddress.IPv6Network((addr, length))
        seen[net] = rng.choice(["allow", "deny"])
    return list(seen.items())


def test_kube_network_policy_equals_the_derived_policy(lz):
    rng = random.Random(23)
    for round_ in range(12):
        v4 = random_prefixes(rng, 32, rng.randint(1, 14))
        v6 = random_prefixes(rng, 128, rng.randint(0, 8)) if round_ % 2 else []
        allow = [str(n) for n, a in v4 + v6 if a == "allow"]
        deny = [str(n) for n, a in v4 + v6 if a == "deny"]
        network = (f"default_allow = {allow!r}\ndefault_deny = {deny!r}\n"
                   f'ipv6 = "{"enabled" if v6 else "disabled"}"').replace("'", '"')
        cfg = config_with(lz, network)
        r = lz.run("--config", cfg, "kube", "pp")
        assert r.returncode == 0, network + r.stderr
        [np] = [d for d in yaml.safe_load_all(r.stdout) if d and d["kind"] == "NetworkPolicy"]
        egress = np["spec"]["egress"]
        blocks = [(ipaddress.ip_network(t["ipBlock"]["cidr"]),
                   [ipaddress.ip_network(e) for e in t["ipBlock"].get("except", [])])
                  for rule in egress for t in rule["to"]]
        for bits, rules in ((32, v4), (128, v6)):
            fam = [(n, a) for n, a in rules if n.prefixlen > 0]
            zero = [a for n, a in rules if n.prefixlen == 0]
            default = zero[0] if zero else "deny"
            if bits == 128 and not v6:
                assert not any(c.version == 6 for c, _ in blocks), blocks
                continue
            mine = [(c, ex) for c, ex in blocks if (c.version == 4) == (bits == 32)]
            for c, ex in mine:
                assert all(e.subnet_of(c) and e != c for e in ex), (c, ex)
            bad = segments_equal(fam, default, mine, bits)
            assert bad is None, f"{network}: the NetworkPolicy and the rules differ at {bad} ({bits}-bit)"
        assert np["spec"]["ingress"] == [] and np["spec"]["policyTypes"] == ["Ingress", "Egress"]


# The fields of agent-sandbox's v1beta1 types (api/v1beta1/sandbox_types.go,
# extensions/api/v1beta1/sandboxtemplate_types.go upstream): Kubernetes'
# schemas do not know them, so the test holds the output to them.
SANDBOX_SPEC = {"podTemplate", "volumeClaimTemplates", "service", "shutdownTime", "shutdownPolicy", "replicas",
                "operatingMode"}
TEMPLATE_SPEC = {"podTemplate", "volumeClaimTemplates", "service", "networkPolicy", "networkPolicyManagement",
                 "envVarsInjectionPolicy", "volumeClaimTemplatesPolicy"}


def test_kube_agent_sandbox(lz):
    """--format agent-sandbox: the same pod as a Sandbox (its claims as
    volume claim templates, which the controller makes and mounts under the
    same volume names) and as a SandboxTemplate whose managed NetworkPolicy
    is off (it would add to ours and reopen egress) and whose claims may add
    no environment and no volumes; our NetworkPolicy selects the pod."""
    cfg = example_config(lz)
    plain = lz.run("--config", cfg, "kube", "claude")
    r = lz.run("--config", cfg, "kube", "claude", "--format", "agent-sandbox")
    assert plain.returncode == 0 and r.returncode == 0, plain.stderr + r.stderr
    path = os.path.join(GOLDEN, "claude-agent-sandbox.yaml")
    got = normalise(lz, r.stdout)
    if os.environ.get("LAZARET_KUBE_GOLDEN_WRITE"):
        with open(path, "w", encoding="utf-8") as f:
            f.write(got)
    assert got == open(path, encoding="utf-8").read(), f"differs from {path}"
    pod = next(yaml.safe_load_all(plain.stdout))
    docs = [d for d in yaml.safe_load_all(r.stdout) if d]
    assert [d["kind"] for d in docs] == ["Sandbox", "NetworkPolicy", "SandboxTemplate"], docs
    sandbox, np, template = docs
    assert sandbox["apiVersion"] == "agents.x-k8s.io/v1beta1"
    assert template["apiVersion"] == "extensions.agents.x-k8s.io/v1beta1"
    assert set(sandbox["spec"]) <= SANDBOX_SPEC and set(template["spec"]) <= TEMPLATE_SPEC
    assert sandbox["spec"]["service"] is False
    ts = template["spec"]
    assert ts["networkPolicyManagement"] == "Unmanaged" and ts["envVarsInjectionPolicy"] == "Disallowed"
    assert ts["volumeClaimTemplatesPolicy"] == "Disallowed"
    assert ts["podTemplate"] == sandbox["spec"]["podTemplate"]
    spec = sandbox["spec"]["podTemplate"]["spec"]
    # The pod of the plain format, less the claims' volumes (the
    # controller adds them, under the claim templates' names).
    want = dict(pod["spec"])
    claims = {v["name"] for v in want.pop("volumes")}
    assert spec.pop("volumes") == []
    assert spec == want
    assert {t["metadata"]["name"] for t in sandbox["spec"]["volumeClaimTemplates"]} == claims
    labels = sandbox["spec"]["podTemplate"]["metadata"]["labels"]
    assert np["spec"]["podSelector"]["matchLabels"].items() <= labels.items()
    r = lz.run("--config", cfg, "kube", "claude", "--format", "agent-sandbox", "--", "true")
    assert r.returncode == 65 and "a Sandbox is a pod that stays" in r.stderr, r.stderr
    r = lz.run("--config", cfg, "kube", "claude", "--format", "nosuch")
    assert r.returncode == 64 and "--format nosuch" in r.stderr, r.stderr
    need_validate()
    r = lz.run("--config", cfg, "kube", "claude", "--format", "agent-sandbox", "--check")
    assert r.returncode == 0 and "its pod and claims were checked as a Pod and claims" in r.stderr, r.stderr


def test_kube_allow_domains_egress_pod(lz):
    """allow_domains on Kubernetes (issue 23): the broker and the relay in
    an egress pod of their own (never the agent's pod: a NetworkPolicy
    holds for a whole pod), its ConfigMap the broker's configuration, a
    Service; the agent's policy adds egress to that pod's relay ports
    only, the egress pod's takes connections from the agent's pod alone;
    the agent's proxy variables name the Service's address. Valid for
    kubernetes-validate."""
    broker = "registry.example/lazaret/broker@sha256:" + "ab" * 32
    cfg = config_with(lz, 'default_allow = ["192.0.2.0/24"]\ndefault_deny = []\nresolvers = ["192.0.2.53"]',
                      'allow_domains = ["api.example.com", "*.example.org:8443"]')
    args = ["--config", cfg, "kube", "pp", "--broker-image", broker] + (["--check"] if VALIDATE else [])
    r = lz.run(*args)
    assert r.returncode == 0, r.stderr
    docs = {(d["kind"], d["metadata"]["name"]): d for d in yaml.safe_load_all(r.stdout) if d}
    agent = next(d for (k, n), d in docs.items() if k == "Pod" and not n.endswith("-egress"))
    name = agent["metadata"]["name"]
    egress_name = name + "-egress"
    assert agent["metadata"]["labels"]["lazaret.dev/role"] == "agent"
    spec = agent["spec"]
    assert spec["enableServiceLinks"] is True
    host = egress_name.upper().replace("-", "_") + "_SERVICE_HOST"
    env = {e["name"]: e.get("value") for e in spec["containers"][0]["env"]}
    assert env["HTTPS_PROXY"] == f"http://$({host}):3128" and env["ALL_PROXY"] == f"socks5h://$({host}):1080", env
    assert env["NODE_USE_ENV_PROXY"] == "1"
    # Nothing of the broker in the agent's pod.
    assert [c["name"] for c in spec["containers"]] == ["agent"]
    assert all(c["image"] != broker for c in spec["containers"] + spec.get("initContainers", []))

    pol = docs[("NetworkPolicy", name)]["spec"]
    assert pol["podSelector"]["matchLabels"]["lazaret.dev/role"] == "agent"
    sel = {"lazaret.dev/domain": agent["metadata"]["labels"]["lazaret.dev/domain"], "lazaret.dev/role": "egress"}
    relay_rule = [e for e in pol["egress"] if any("podSelector" in t for t in e["to"])]
    assert relay_rule == [{"to": [{"podSelector": {"matchLabels": sel}}],
                           "ports": [{"protocol": "TCP", "port": 3128}, {"protocol": "TCP", "port": 1080}]}], pol
    assert pol["ingress"] == []

    pod = docs[("Pod", egress_name)]
    assert pod["metadata"]["labels"]["lazaret.dev/role"] == "egress"
    assert [c["name"] for c in pod["spec"]["containers"]] == ["broker", "relay"]
    assert all(c["image"] == broker for c in pod["spec"]["containers"])
    assert pod["spec"]["runtimeClassName"] == "gvisor" and pod["spec"]["automountServiceAccountToken"] is False
    assert pod["spec"]["dnsConfig"]["nameservers"] == ["192.0.2.53"]
    epol = docs[("NetworkPolicy", egress_name)]["spec"]
    assert epol["podSelector"]["matchLabels"] == sel
    assert epol["ingress"][0]["from"] == [{"podSelector": {"matchLabels": {**sel, "lazaret.dev/role": "agent"}}}]
    assert {"protocol": "TCP", "port": 8443} in epol["egress"][1]["ports"], epol
    assert epol["egress"][0]["to"] == [{"ipBlock": {"cidr": "192.0.2.53/32"}}], epol
    assert docs[("Service", egress_name)]["spec"]["selector"] == sel
    conf = json.loads(docs[("ConfigMap", egress_name)]["data"]["broker.json"])
    assert conf["rules"] == ["api.example.com:443", "*.example.org:8443"] and conf["resolvers"] == ["192.0.2.53"]
    assert conf["netpolicy"].startswith("lazaret-derived-network-policy v1\n")
    if VALIDATE:
        # The agent's Pod, its claim and policy; the egress ConfigMap, Pod,
        # Service and policy.
        assert "--check: 7 manifests valid" in r.stderr, r.stderr
