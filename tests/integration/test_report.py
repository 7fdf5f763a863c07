# SPDX-License-Identifier: MIT
"""lazaret report (issue 19) from a real session on the real stack: an
escalation allowed and one refused, a connection the broker refused, a git
write the router refused and files changed, each in every format; the
formats checked by independent parsers (the SARIF 2.1.0 schema, a schema
of our own, cmark-gfm, Python's html.parser, headless Chromium, whose
screenshot is kept in the test output); what the agent chose inert in
each; and the safe writer against what the agent can plant in the
workspace."""
import glob
import html.parser
import json
import os
import re
import shutil
import subprocess
import tempfile
import time

import jsonschema
import pytest

from conftest import BUILD
from test_egress import HOST4, gone, names  # noqa: F401  (fixture)
from test_escalation import AUTO
from test_events import events
from test_run import Domain, busybox_image, debian_image, make_repo  # noqa: F401  (fixture)

SCHEMAS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "data", "schemas")
# What the agent chooses: terminal escapes, a bidi override, markup, a
# Markdown link, table breakers (a pipe after a backslash too), an e-mail
# address, a bare URL and backticks that would end a code span.
EVIL = "\x1b]0;owned\x07\x1b[2J\u202egnp.exe</script><img src=x onerror=alert(1)>[click](http://e.test/)|a|b| " \
       "x@y.test www.e.test \\|c`d``"
# The same without "/", as a file name.
EVIL_NAME = "n\x1b[2J\u202egnp<script>alert(1)<img src=x>[click](javascript:alert(1))|a|b|.txt"
FORMATS = ["md", "html", "json", "jsonl", "sarif"]


def visible(s):
    """s as the report shows it (the escalation prompt's rules)."""
    return s.replace("\\", "\\\\").replace("\x1b", "\\x1b").replace("\x07", "\\x07").replace("\u202e", "<U+202E>")


def schema(name):
    with open(os.path.join(SCHEMAS, name)) as f:
        return json.load(f)


def output_dir():
    """Where a test keeps what a person should be able to look at (the
    screenshots): build/test-output."""
    d = os.path.join(BUILD, "test-output")
    os.makedirs(d, exist_ok=True)
    return d


@pytest.fixture
def reported(lz, busybox_image, names):  # noqa: F811
    """One session did everything a report lists; the Domain, its events."""
    make_repo(lz)
    sock = os.path.join(lz.base, "sock")
    os.makedirs(sock, mode=0o700, exist_ok=True)
    os.chown(sock, lz.user.pw_uid, lz.user.pw_gid)
    d = Domain(lz, busybox_image,
               network=f'default_allow = []\ndefault_deny = []\nipv6 = "disabled"\nresolvers = ["{HOST4}"]\n'
                       f'probe_domains = ["ok.example.test:8080"]\n',
               extra='allow_domains = ["ok.example.test:8080"]\n')
    text = open(d.cfg).read().replace("[escalation]\nenabled = false\n",
                                      f"[escalation]\nenabled = true\nauto_approve = {AUTO}\n")
    lz.write("cfg.toml", text)
    git = os.path.join(lz.work, ".git")
    script = f"""
/run/lazaret/escalate uname -a >/dev/null; echo "esc=$?"
/run/lazaret/escalate id "$1"; echo "refused=$?"
wget -q -O - http://unlisted.example.test:8080/x; echo "net=$?"
echo "[core] fsmonitor = evil" >> {git}/config; echo "git=$?"
cd /workspace && printf 'more\\n' >> tracked.txt && echo new > "$2"; echo "files=$?"
"""
    r = d.run("run", "--", "/bin/sh", "-c", script, "sh", EVIL, EVIL_NAME, timeout=180)
    try:
        assert r.returncode == 0, r.stderr + d.log()
        for ok in ("esc=0", "files=0"):
            assert ok in r.stdout, r.stdout
        for bad in ("refused=0", "net=0", "git=0"):
            assert bad not in r.stdout, r.stdout
        evs = events(d, want=lambda evs: any(e["source"] == "files" for e in evs))
        yield d, evs
    finally:
        gone(lz, d)


def report(d, *args):
    r = d.run("report", *args)
    assert r.returncode == 0, r.stderr
    return r.stdout


def test_every_format_lists_the_session(reported, lz):
    d, evs = reported
    session = next(e["session"] for e in evs if (e["source"], e["kind"]) == ("session", "started"))
    out = os.path.join(lz.work, "reports")
    files = {}
    for f in FORMATS:
        r = d.run("report", "--format", f, "--output", "reports")
        assert r.returncode == 0, r.stderr
        path = os.path.join(out, f"lazaret-report-shell.{f}")
        assert r.stdout.strip() == f"reports/lazaret-report-shell.{f}", r.stdout
        st = os.lstat(path)
        assert oct(st.st_mode & 0o7777) == oct(0o600) and st.st_uid == lz.user.pw_uid, st
        files[f] = open(path, "rb").read()
        # Standard output carries the same document but for its time.
        assert len(report(d, "--format", f)) > 0
    assert oct(os.stat(out).st_mode & 0o777) == oct(0o700)
    # Every format is ASCII but Markdown and HTML, which keep other
    # UTF-8; none holds a control character or a bidi mark.
    for f, raw in files.items():
        text = raw.decode("utf-8")
        assert not any(ord(c) < 0x20 and c not in "\n" for c in text), f
        assert "\u202e" not in text, f
        if f not in ("md", "html"):
            assert raw.isascii(), f

    # JSON: our schema, and what happened.
    m = json.loads(files["json"])
    jsonschema.Draft7Validator(schema("report.schema.json")).validate(m)
    [sb] = m["sandboxes"]
    [s] = sb["sessions"]
    assert s["id"] == session and s["user"] == lz.user.pw_name and s["outcome"] == "Exited", s
    assert s["argv"][:2] == ["/bin/sh", "-c"] and s["argv"][-2] == visible(EVIL), s
    esc = s["escalations"]
    assert [e["decision"] for e in esc] == ["auto", "refused"], esc
    assert esc[1]["command"].startswith("id ") and "\\x1b[2J<U+202E>gnp.exe</script>" in esc[1]["command"], esc
    # The processes the session started (gVisor's trace points), the
    # agent's strings among them; the launch's probes are not the agent's.
    ran = [p["argv"] for p in s["processes"]["list"]]
    assert ["/run/lazaret/escalate", "uname", "-a"] in ran, ran
    assert ["/run/lazaret/escalate", "id", visible(EVIL)] in ran, ran
    assert s["processes"]["count"] == len(ran) and s["processes"]["omitted"] == 0, s["processes"]
    assert any(e["source"] == "process" and e["data"].get("probe") for e in evs), evs  # on record, marked
    assert not any("--probe" in a for a in ran + [p["argv"] for p in sb["processes"]["list"]]), sb["processes"]
    changed = {f["path"]: f for f in s["files"]["files"]}
    assert changed["tracked.txt"] == {"path": "tracked.txt", "change": "modified", "added": 1, "deleted": 0}
    assert changed[visible(EVIL_NAME)]["change"] == "untracked", changed
    # The launch's own proof of egress by name (a probe of a listed name
    # and of one no rule lists) is marked on the record, and not the
    # agent's in the report.
    probes = [e["data"] for e in evs if e["source"] == "network" and e["data"].get("probe")]
    assert {p["host"] for p in probes} == {"ok.example.test", "unlisted.lazaret-probe.invalid"}, probes
    assert all("lazaret-probe" not in (n["host"] or "") for n in sb["network"]), sb["network"]
    refused = [n for n in sb["network"] if n["verdict"] == "refused"]
    assert any(n.get("host") == "unlisted.example.test" and n["reason"] == "name-not-listed" for n in refused), sb
    assert {"source": "git", "rule": "git", "op": "write", "path": ".git/config", "errno": "EROFS"}.items() <= \
        sb["refusals"][0].items(), sb["refusals"]

    # JSON lines: each line by the schema of its type (derived from ours).
    full = schema("report.schema.json")
    defs = full["definitions"]

    def line_schema(base, drop=(), add=()):
        s = json.loads(json.dumps(base))
        for k in drop:
            s["properties"].pop(k)
            s["required"].remove(k)
        s["properties"]["type"] = {"type": "string"}
        s["required"].append("type")
        for k, v in add:
            s["properties"][k] = v
            s["required"].append(k)
        s["definitions"] = defs
        return s
    gen = ("generation", {"type": "integer"})
    sess = ("session", {"type": "string"})
    files_summary = json.loads(json.dumps(defs["files"]))
    files_summary["properties"].pop("files")
    files_summary["required"].remove("files")
    procs_summary = json.loads(json.dumps(defs["processes"]))
    procs_summary["properties"].pop("list")
    procs_summary["required"].remove("list")
    session_line = line_schema(defs["session"], drop=("escalations",), add=(gen,))
    session_line["properties"]["files"] = {"anyOf": [files_summary, {"type": "null"}]}
    session_line["properties"]["processes"] = procs_summary
    sandbox_line = line_schema(defs["sandbox"], drop=("sessions", "network", "refusals"))
    sandbox_line["properties"]["processes"] = procs_summary
    process_line = line_schema(defs["process"], add=(gen,))
    process_line["properties"]["session"] = {"type": "string"}
    kinds = {
        "report": line_schema(full, drop=("sandboxes",)),
        "sandbox": sandbox_line,
        "process": process_line,
        "session": session_line,
        "escalation": line_schema(defs["escalation"], add=(gen, sess)),
        "file": line_schema(defs["file"], add=(gen, sess)),
        "network": line_schema(defs["network"], add=(gen,)),
        "refusal": line_schema(defs["refusal"], add=(gen,)),
    }
    seen = []
    for line in files["jsonl"].decode().splitlines():
        o = json.loads(line)
        jsonschema.Draft7Validator(kinds[o["type"]]).validate(o)
        seen.append(o["type"])
    assert seen[0] == "report" and {"sandbox", "session", "escalation", "file", "network", "refusal",
                                    "process"} <= set(seen)

    # SARIF: the 2.1.0 schema; each refused attempt a result with a stable
    # rule id, a path below the workspace where there is one.
    sarif = json.loads(files["sarif"])
    jsonschema.Draft4Validator(schema("sarif-schema-2.1.0.json")).validate(sarif)
    [run] = sarif["runs"]
    rules = [r["id"] for r in run["tool"]["driver"]["rules"]]
    by_rule = {}
    for res in run["results"]:
        assert rules[res["ruleIndex"]] == res["ruleId"], res
        by_rule.setdefault(res["ruleId"], []).append(res)
    assert set(by_rule) == {"escalation.refused", "network.refused", "git.refused"}, by_rule
    [g] = by_rule["git.refused"]
    loc = g["locations"][0]["physicalLocation"]["artifactLocation"]
    assert loc == {"uri": ".git/config", "uriBaseId": "WORKSPACE"}, g
    assert run["originalUriBaseIds"]["WORKSPACE"]["uri"] == "file://" + lz.work + "/"
    assert any("unlisted.example.test:8080" in r["message"]["text"] for r in by_rule["network.refused"])
    [e] = by_rule["escalation.refused"]
    assert "\\x1b[2J<U+202E>" in e["message"]["text"] and e["properties"]["session"] == session, e

    # Markdown, through GFM's own renderer: the session's parts are there,
    # and what the agent chose made no link, image, HTML or table cell.
    md = files["md"].decode()
    r = subprocess.run(["cmark-gfm", "-e", "table", "-e", "autolink", "-e", "strikethrough", "-e", "tagfilter"],
                       input=md, capture_output=True, text=True, check=True)
    rendered = r.stdout
    assert "<a " not in rendered and "<img" not in rendered and "<script" not in rendered, rendered
    assert "&lt;/script&gt;&lt;img src=x onerror=alert(1)&gt;[click](http://e.test/)|a|b|" in rendered, rendered
    # A pipe after a backslash stays in its cell; backticks stay in the span.
    assert esc[1]["command"].count("\\\\|c`d``") == 1, esc[1]
    assert "\\\\|c`d``" in rendered, rendered
    for want in ("uname -a", "unlisted.example.test", ".git/config", "tracked.txt", "EROFS", "name-not-listed",
                 "Processes started", "/run/lazaret/escalate"):
        assert want in rendered, want
    # Every table row has as many cells as its header.
    for table in rendered.split("<table>")[1:]:
        table = table.split("</table>")[0]
        heads = len(re.findall(r"<th[ >]", table.split("</thead>")[0]))
        for row in table.split("<tbody>")[1].split("<tr>")[1:]:
            assert len(re.findall(r"<td[ >]", row)) == heads, row

    # HTML: parsed by Python's html.parser (only the elements we write, no
    # script, no attribute from the record) and rendered by Chromium.
    check_html(files["html"].decode())
    screenshot(os.path.join(out, "lazaret-report-shell.html"), lz, "report-session")


ALLOWED = {"html", "head", "meta", "title", "style", "body", "h1", "h2", "h3", "h4", "p", "span", "br", "ul", "li",
           "table", "thead", "tbody", "tr", "th", "td"}


class Tags(html.parser.HTMLParser):
    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.tags, self.attrs, self.text = [], [], []

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        self.attrs.extend(attrs)

    def handle_data(self, data):
        self.text.append(data)


def check_html(doc):
    p = Tags()
    p.feed(doc)
    p.close()
    assert set(p.tags) <= ALLOWED, set(p.tags) - ALLOWED
    for k, v in p.attrs:
        assert k in ("lang", "charset", "http-equiv", "content", "class"), (k, v)
        assert k != "class" or v in ("refused", "allowed", "meta"), (k, v)
    csp = [v for k, v in p.attrs if k == "content"]
    assert csp == ["default-src 'none'; style-src 'unsafe-inline'"], csp
    text = "".join(p.text)
    assert "</script><img src=x onerror=alert(1)>[click](http://e.test/)|a|b|" in text
    assert "\\x1b[2J<U+202E>gnp" in text
    return text


def chromium(lz, *args):
    """Headless Chromium as the test user, in a network namespace of its
    own (nothing it could try to reach exists), with a fresh profile."""
    prof = tempfile.mkdtemp(prefix="lazaret-chromium-")
    os.chown(prof, lz.user.pw_uid, lz.user.pw_gid)
    try:
        return subprocess.run(["runuser", "-u", lz.user.pw_name, "--", "unshare", "-rn", "chromium", "--headless",
                               "--no-sandbox", "--disable-gpu", "--no-first-run", f"--user-data-dir={prof}"]
                              + list(args), capture_output=True, text=True, timeout=120)
    finally:
        shutil.rmtree(prof, ignore_errors=True)


def screenshot(path, lz, name):
    """Render the HTML file at path; keep the screenshot; the DOM Chromium
    built holds no script and shows the agent's text as text."""
    r = chromium(lz, "--dump-dom", "file://" + path)
    assert r.returncode == 0 and "<h1>Lazaret report" in r.stdout, r.stderr
    assert "<script" not in r.stdout and "<img" not in r.stdout, r.stdout
    shots = tempfile.mkdtemp(prefix="lazaret-shot-")
    os.chown(shots, lz.user.pw_uid, lz.user.pw_gid)
    try:
        blank = os.path.join(lz.work, "blank.html")
        with open(blank, "w") as f:
            f.write("<!DOCTYPE html><html><body></body></html>")
        os.chmod(blank, 0o644)
        sizes = {}
        for what, src in (("report", path), ("blank", blank)):
            png = os.path.join(shots, what + ".png")
            r = chromium(lz, f"--screenshot={png}", "--window-size=1280,1600", "file://" + src)
            assert r.returncode == 0 and os.path.exists(png), r.stderr
            with open(png, "rb") as f:
                data = f.read()
            assert data[:8] == b"\x89PNG\r\n\x1a\n", data[:8]
            assert int.from_bytes(data[16:20], "big") == 1280 and int.from_bytes(data[20:24], "big") == 1600
            sizes[what] = len(data)
        # Text and tables compress far worse than an empty page.
        assert sizes["report"] > 4 * sizes["blank"], sizes
        kept = os.path.join(output_dir(), name + ".png")
        shutil.copyfile(os.path.join(shots, "report.png"), kept)
        print(f"screenshot: {kept}")
    finally:
        shutil.rmtree(shots, ignore_errors=True)
        if os.path.exists(os.path.join(lz.work, "blank.html")):
            os.unlink(os.path.join(lz.work, "blank.html"))


def test_one_session_and_bad_options(reported, lz):
    d, evs = reported
    session = next(e["session"] for e in evs if (e["source"], e["kind"]) == ("session", "started"))
    m = json.loads(report(d, "--format", "json", "--session", session[:8]))
    assert m["session"] == session[:8] and [s["id"] for s in m["sandboxes"][0]["sessions"]] == [session], m
    m = json.loads(report(d, "--format", "json", "--session", "0000"))
    assert m["sandboxes"] == [], m
    assert "No such session on record." in report(d, "--session", "0000")
    for args, want in ((["--format", "pdf"], "--format pdf: no such format"),
                       (["--session", "../x"], "--session ../x: not a session id")):
        r = d.run("report", *args)
        assert r.returncode == 64 and want in r.stderr and r.stdout == "", r.stderr
        assert len(r.stderr.strip().splitlines()) == 1, r.stderr


def test_the_writer_refuses_what_the_agent_planted(lz, busybox_image):
    """Direct mode: the agent plants, in the workspace, a link named like
    the report directory, and in a real one a link and a dangling link
    named like reports; a FIFO with a report's name beside them. lazaret report refuses each, writes nothing
    through them, and leaves what it found as it was."""
    d = Domain(lz, busybox_image, extra='workspace_mode = "direct"\n')
    victim = os.path.join(lz.home, "victim")
    lz.write("home/victim", "precious\n")
    elsewhere = os.path.join(lz.home, "elsewhere")
    os.makedirs(elsewhere)
    os.chown(elsewhere, lz.user.pw_uid, lz.user.pw_gid)
    made = os.path.join(lz.home, "made-through-link")
    script = (f"cd /workspace && ln -s {elsewhere} linked && mkdir reports && "
              f"ln -s {victim} reports/lazaret-report-shell.md && "
              f"ln -s {made} reports/lazaret-report-shell.json && echo planted")
    r = d.run("run", "--", "/bin/sh", "-c", script)
    assert r.returncode == 0 and "planted" in r.stdout, r.stderr
    d.assert_clean()
    # A FIFO made inside stays inside (gVisor's gofer keeps it in the
    # sandbox); a host process of the person's may still leave one.
    fifo = os.path.join(lz.work, "reports", "lazaret-report-shell.html")
    if not os.path.lexists(fifo):
        os.mkfifo(fifo)
        os.chown(fifo, lz.user.pw_uid, lz.user.pw_gid)
    before = sorted(os.listdir(os.path.join(lz.work, "reports")))

    for out, fmt, want in (("linked", "md", "linked is a symbolic link"),
                           ("linked/sub", "md", "linked is a symbolic link"),
                           ("reports", "md", "lazaret-report-shell.md is already there (a symbolic link)"),
                           ("reports", "json", "lazaret-report-shell.json is already there (a symbolic link)"),
                           ("reports", "html", "lazaret-report-shell.html is already there (a FIFO)")):
        t0 = time.monotonic()
        r = d.run("report", "--format", fmt, "--output", out, timeout=30)
        assert r.returncode == 125 and want in r.stderr and r.stdout == "", (out, fmt, r.stderr)
        assert len(r.stderr.strip().splitlines()) == 1, r.stderr
        assert time.monotonic() - t0 < 20  # a FIFO never holds it
    assert open(victim).read() == "precious\n"
    assert not os.path.lexists(made)
    assert os.listdir(elsewhere) == []
    assert sorted(os.listdir(os.path.join(lz.work, "reports"))) == before
    # A format nothing was planted for is written beside them.
    r = d.run("report", "--format", "sarif", "--output", "reports")
    assert r.returncode == 0, r.stderr
    assert os.path.isfile(os.path.join(lz.work, "reports", "lazaret-report-shell.sarif"))
    # And never over a report already there: the next one beside it
    # (issue 42: a second report into one directory failed).
    first = open(os.path.join(lz.work, "reports", "lazaret-report-shell.sarif"), "rb").read()
    for k in (2, 3):
        r = d.run("report", "--format", "sarif", "--output", "reports")
        assert r.returncode == 0 and r.stdout == f"reports/lazaret-report-shell-{k}.sarif\n", r.stdout + r.stderr
        assert os.path.isfile(os.path.join(lz.work, "reports", f"lazaret-report-shell-{k}.sarif"))
    assert open(os.path.join(lz.work, "reports", "lazaret-report-shell.sarif"), "rb").read() == first


def test_report_of_nothing(lz, busybox_image):
    """No record yet: a report that says so, in every format."""
    d = Domain(lz, busybox_image)
    assert "Nothing on record." in report(d)
    m = json.loads(report(d, "--format", "json"))
    jsonschema.Draft7Validator(schema("report.schema.json")).validate(m)
    assert m["record"]["records"] == 0 and m["sandboxes"] == [], m
    sarif = json.loads(report(d, "--format", "sarif"))
    jsonschema.Draft4Validator(schema("sarif-schema-2.1.0.json")).validate(sarif)
    assert sarif["runs"][0]["results"] == []
    assert not glob.glob(os.path.join(lz.base, "data", "domains", "*", "events"))


def test_a_session_that_commits_reports_what_it_committed(lz, debian_image):
    """Issue 42: a session that made three files and committed them was
    reported with one file, +1 (the record read git diff -z's output up to
    its first NUL); lazaret diff showed the three. Now the record, the
    report and lazaret diff agree."""
    make_repo(lz)
    d = Domain(lz, debian_image)
    script = ("cd /workspace && export GIT_AUTHOR_NAME=a GIT_AUTHOR_EMAIL=a@a GIT_COMMITTER_NAME=a "
              "GIT_COMMITTER_EMAIL=a@a && printf '1\\n' > one && printf '1\\n2\\n' > two && "
              "printf 'more\\n' >> tracked.txt && git add -A && git commit -qm three && echo DONE")
    r = d.run("run", "--", "/bin/bash", "-c", script)
    assert r.returncode == 0 and "DONE" in r.stdout, r.stderr + d.log()
    events(d, want=lambda evs: any(e["source"] == "files" for e in evs))
    rep = json.loads(report(d, "--format", "json"))
    [sb] = rep["sandboxes"]
    [ss] = sb["sessions"]
    got = sorted(f["path"] for f in ss["files"]["files"])
    assert got == ["one", "tracked.txt", "two"], ss["files"]
    assert (ss["files"]["added"], ss["files"]["deleted"]) == (4, 0), ss["files"]
    # Made and committed: added, not modified (the record says which).
    change = {f["path"]: f["change"] for f in ss["files"]["files"]}
    assert change == {"one": "added", "two": "added", "tracked.txt": "modified"}, ss["files"]
    diff = d.run("diff")
    assert diff.returncode == 0, diff.stderr
    for name in got:
        assert name in diff.stdout, diff.stdout
    d.assert_clean()
