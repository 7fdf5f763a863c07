#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""An SSH server for tests (paramiko's server side, Debian's
python3-paramiko), run inside a network namespace a test made: it takes one
public key, and runs git-upload-pack for a repository under ROOT when a
client asks it to (what `git clone ssh://...` asks), nothing else. The log
records "ssh-exec COMMAND" for each request and "ssh-refused ..." for
anything it will not do.

usage: testsshd.py ADDR PORT HOSTKEY AUTHORIZED_PUBKEY ROOT [--log FILE]
Prints "ready" on stdout once listening."""
import base64
import os
import shlex
import socket
import subprocess
import sys
import threading
import time

import paramiko

lock = threading.Lock()


def note(log, line):
    if log:
        with lock:
            log.write(line + "\n")


class Server(paramiko.ServerInterface):
    def __init__(self, allowed, root, log):
        self.allowed, self.root, self.log = allowed, root, log
        self.command = None
        self.ready = threading.Event()

    def get_allowed_auths(self, username):
        return "publickey"

    def check_auth_publickey(self, username, key):
        if key.get_name() == self.allowed.get_name() and key.asbytes() == self.allowed.asbytes():
            return paramiko.AUTH_SUCCESSFUL
        note(self.log, f"ssh-refused key of {username}")
        return paramiko.AUTH_FAILED

    def check_channel_request(self, kind, chanid):
        return paramiko.OPEN_SUCCEEDED if kind == "session" else paramiko.OPEN_FAILED_ADMINISTRATIVELY_PROHIBITED

    def check_channel_exec_request(self, channel, command):
        words = shlex.split(command.decode(errors="replace"))
        repo = os.path.realpath(os.path.join(self.root, words[-1].lstrip("/"))) if len(words) == 2 else ""
        if len(words) != 2 or words[0] != "git-upload-pack" or not repo.startswith(self.root + os.sep):
            note(self.log, f"ssh-refused {command!r}")
            return False
        note(self.log, f"ssh-exec {' '.join(words)}")
        self.command = ["git-upload-pack", repo]
        self.ready.set()
        return True


def pump(channel, proc):
    def up():
        while True:
            data = channel.recv(65536)
            if not data:
                break
            proc.stdin.write(data)
            proc.stdin.flush()
        proc.stdin.close()

    t = threading.Thread(target=up, daemon=True)
    t.start()
    while True:
        data = proc.stdout.read1(65536)
        if not data:
            break
        channel.sendall(data)
    channel.send_exit_status(proc.wait())


def serve(c, host_key, allowed, root, log):
    t = paramiko.Transport(c)
    try:
        t.add_server_key(host_key)
        server = Server(allowed, root, log)
        t.start_server(server=server)
        channel = t.accept(30)
        if channel is None or not server.ready.wait(30):
            return
        proc = subprocess.Popen(server.command, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=subprocess.DEVNULL)
        pump(channel, proc)
        channel.close()
        # As sshd does, the client hangs up first: a transport closed under
        # a client that still sends (its channel close, its disconnect)
        # breaks its pipe to the ProxyCommand ("client_loop: send
        # disconnect: Broken pipe"), ssh exits 255, and git calls a
        # complete clone failed.
        deadline = time.monotonic() + 10
        while t.is_active() and time.monotonic() < deadline:
            time.sleep(0.05)
    except (OSError, EOFError, paramiko.SSHException) as e:
        note(log, f"ssh-error {e}")
    finally:
        t.close()


def main():
    addr, port, key_file, pub_file, root = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5]
    log = open(sys.argv[sys.argv.index("--log") + 1], "a", buffering=1) if "--log" in sys.argv else None
    host_key = paramiko.Ed25519Key.from_private_key_file(key_file)
    kind, blob = open(pub_file).read().split()[:2]
    if kind != "ssh-ed25519":
        sys.exit(f"testsshd: {pub_file}: an ssh-ed25519 key, please")
    allowed = paramiko.Ed25519Key(data=base64.b64decode(blob))
    fam = socket.AF_INET6 if ":" in addr else socket.AF_INET
    s = socket.socket(fam, socket.SOCK_STREAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind((addr, port))
    s.listen(16)
    print("ready", flush=True)
    while True:
        c, peer = s.accept()
        note(log, f"accept {addr} {peer[0]}")
        threading.Thread(target=serve, args=(c, host_key, allowed, os.path.realpath(root), log), daemon=True).start()


main()
