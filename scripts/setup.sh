#!/bin/sh
# SPDX-License-Identifier: MIT
# Prepare this Debian 12 host for building, testing and running Lazaret.
# Idempotent: every step checks first and changes only what is missing.
# Works as root, or as a normal user with sudo.
#
#   scripts/setup.sh              packages and host preparation for `make run`
#   scripts/setup.sh --test-user  also the unprivileged test user for `make check`
#   scripts/setup.sh --memory-cgroup USER
#                                 a cgroup v1 memory directory USER may make
#                                 cgroups in (runtime.memory_cgroup: the
#                                 native backend's memory_limit in the kernel)
set -eu

TEST_USER=${LAZARET_TEST_USER:-lazaret-test}
want_test_user=0
cgroup_users=
next_is_user=0
for a in "$@"; do
	if [ "$next_is_user" -eq 1 ]; then
		cgroup_users="$cgroup_users $a"
		next_is_user=0
		continue
	fi
	case "$a" in
	--test-user) want_test_user=1 ;;
	--memory-cgroup) next_is_user=1 ;;
	*) echo "setup: unknown option $a" >&2; exit 64 ;;
	esac
done
if [ "$next_is_user" -eq 1 ]; then
	echo "setup: --memory-cgroup needs a user name" >&2
	exit 64
fi

if [ "$(id -u)" -eq 0 ]; then
	SUDO=
else
	command -v sudo >/dev/null 2>&1 || {
		echo "setup: not root and sudo is missing: run 'make' as root, or install sudo" >&2
		exit 1
	}
	SUDO=as_root
fi

# sudo for what needs root (packages, /etc/subuid, devices), saying why
# before it first asks for a password.
sudo_explained=0
as_root() {
	if [ "$sudo_explained" -eq 0 ] && ! sudo -n true 2>/dev/null; then
		echo "setup: installing what this host lacks (Debian packages, /etc/subuid entries, device modes) needs root:" >&2
		echo "setup: sudo asks for your password for that alone; lazaret itself runs as you" >&2
	fi
	sudo_explained=1
	sudo "$@"
}

say() { echo "setup: $*"; }

as_test_user() {
	if [ "$(id -u)" -eq 0 ]; then
		runuser -u "$TEST_USER" -- "$@"
	else
		sudo -u "$TEST_USER" -- "$@"
	fi
}

# Build and test tools (nftables: nft reads back the DNS filter netd writes;
# dosfstools and fusefat: a FAT Domain Root for the
# State Anchor's bad-file-system test), then what a sandbox launch needs
# (lazaret doctor checks the same list).
PACKAGES="meson ninja-build gcc clang clang-format pkg-config libclang-rt-14-dev
libssl-dev zlib1g-dev libjansson-dev liblmdb-dev libseccomp-dev libc-ares-dev libcmocka-dev libncurses-dev libvterm-dev libyaml-dev python3-pytest libfuse3-dev fuse3
dosfstools fusefat lmdb-utils tmux nftables
podman runsc runc fuse-overlayfs fuse2fs e2fsprogs slirp4netns uidmap sudo busybox-static mmdebstrap curl git iproute2"

# Only for `make check` and `make bench`: the report tests' independent
# oracles (the JSON schemas' validator, GFM's own Markdown renderer, a
# browser), bubblewrap, bench-native's baseline, paramiko for the SSH server
# the egress tests' git clone talks to, and for lazaret kube's tests a YAML
# reader and a venv for kubernetes-validate (below); the openssl command
# (that a broken OpenSSL configuration fails a program that reads it).
if [ "$want_test_user" -eq 1 ]; then
	PACKAGES="$PACKAGES groff-base python3-jsonschema cmark-gfm chromium bubblewrap python3-yaml python3-venv python3-paramiko catatonit openssl"
fi

missing=
for p in $PACKAGES; do
	if ! dpkg-query -W -f='${Status}\n' "$p" 2>/dev/null | grep -q '^install ok installed$'; then
		missing="$missing $p"
	fi
done
if [ -n "$missing" ]; then
	say "installing:$missing"
	$SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends $missing ||
		{ $SUDO apt-get update &&
		  $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends $missing; }
fi

# A current gVisor (issue 15). Debian's runsc (20221219) fails statx and
# lstat on this kernel ("ls -l /" says "Invalid argument") and cannot start
# its own network stack. A runsc on PATH that passes the probe below is
# kept; otherwise the pinned gVisor (a commit of its go branch, see
# docs/ARCHITECTURE.md for why this one) is built from the Go module proxy,
# which the checksum database verifies, and installed as
# /usr/local/bin/runsc, ahead of Debian's on PATH. Debian's package stays.
GVISOR_PIN=v0.0.0-20260905035102-160fafc42237
GVISOR_VERSION=go-20260905-160fafc42237
RUNSC_DEST=/usr/local/bin/runsc

# statx and lstat of a symbolic link inside the sandbox's own file system.
runsc_works() {
	[ -x "$1" ] &&
		"$1" --rootless --network=none do /bin/sh -c \
			'stat / >/dev/null && ln -s / /tmp/.lazaret-probe && ls -l /tmp/.lazaret-probe >/dev/null' \
			>/dev/null 2>&1
}

current=$(command -v runsc || true)
if [ -n "$current" ] && runsc_works "$current"; then
	:
elif [ -x "$RUNSC_DEST" ] && "$RUNSC_DEST" --version 2>/dev/null | grep -q "runsc version $GVISOR_VERSION\$" &&
	runsc_works "$RUNSC_DEST"; then
	:
elif ! command -v go >/dev/null; then
	say "WARNING: ${current:-runsc} fails the statx/lstat probe and Go is not installed to build gVisor"
	say "WARNING: $GVISOR_PIN; keeping it (install Go 1.21 or newer and run setup again)"
else
	say "building gVisor's runsc $GVISOR_PIN from the Go module proxy (${current:-no runsc} fails the probe)"
	gobin=$(mktemp -d)
	if CGO_ENABLED=0 GOBIN="$gobin" GOFLAGS=-mod=mod go install \
		-ldflags "-X gvisor.dev/gvisor/runsc/version.version=$GVISOR_VERSION" \
		"gvisor.dev/gvisor/runsc@$GVISOR_PIN" && runsc_works "$gobin/runsc"; then
		$SUDO install -m 0755 "$gobin/runsc" "$RUNSC_DEST"
		say "installed $RUNSC_DEST ($("$RUNSC_DEST" --version | head -n 1))"
	else
		say "WARNING: building or probing gVisor $GVISOR_PIN failed (see above); keeping ${current:-no runsc}"
	fi
	rm -rf "$gobin"
fi

# lazaret kube --check and its tests: kubernetes-validate from PyPI (the
# Kubernetes OpenAPI schemas, offline), pinned, in a venv of its own, on
# PATH as /usr/local/bin/kubernetes-validate.
KV_VERSION=1.37.0
KV_VENV=/opt/lazaret-test/kubernetes-validate
if [ "$want_test_user" -eq 1 ] &&
	! { [ -x "$KV_VENV/bin/kubernetes-validate" ] &&
		"$KV_VENV/bin/kubernetes-validate" --version 2>/dev/null | grep -q "$KV_VERSION"; }; then
	say "installing kubernetes-validate $KV_VERSION from PyPI into $KV_VENV"
	$SUDO rm -rf "$KV_VENV"
	$SUDO /usr/bin/python3 -m venv "$KV_VENV" &&
		$SUDO "$KV_VENV/bin/pip" install --quiet --disable-pip-version-check "kubernetes-validate==$KV_VERSION" ||
		{ say "installing kubernetes-validate failed (see above)"; exit 1; }
fi
if [ "$want_test_user" -eq 1 ] && [ "$(readlink /usr/local/bin/kubernetes-validate)" != "$KV_VENV/bin/kubernetes-validate" ]; then
	$SUDO ln -sf "$KV_VENV/bin/kubernetes-validate" /usr/local/bin/kubernetes-validate
fi

# Rootless FUSE (fuse-overlayfs, the git router) and slirp4netns need these
# devices; on this kind of host they are 0600 root, on most distributions
# 0666. The udev rule keeps the mode across reboots where udev runs.
for dev in /dev/fuse /dev/net/tun; do
	if [ -c "$dev" ] && [ "$(stat -c %a "$dev")" != 666 ]; then
		say "chmod 0666 $dev"
		$SUDO chmod 0666 "$dev"
	fi
done
RULE=/etc/udev/rules.d/60-lazaret.rules
if [ -d /etc/udev/rules.d ] && [ ! -f "$RULE" ]; then
	say "writing $RULE"
	printf '%s\n' 'KERNEL=="fuse", MODE="0666"' 'KERNEL=="tun", SUBSYSTEM=="misc", MODE="0666"' |
		$SUDO tee "$RULE" >/dev/null
fi

# Rootless Podman needs subordinate id ranges. Give each user that needs one
# a range of 65536 ids above every range already handed out.
add_subids() {
	u=$1
	for f in /etc/subuid /etc/subgid; do
		$SUDO touch "$f"
		if ! grep -q "^$u:" "$f"; then
			start=$(awk -F: 'BEGIN { m = 100000 } { e = $2 + $3; if (e > m) m = e } END { print m }' "$f")
			say "adding $u:$start:65536 to $f"
			echo "$u:$start:65536" | $SUDO tee -a "$f" >/dev/null
		fi
	done
}

# Run as user $1 (from root, through sudo, or as that very user).
as_user() {
	u=$1
	shift
	if [ "$(id -un)" = "$u" ]; then
		"$@"
	elif [ "$(id -u)" -eq 0 ]; then
		runuser -u "$u" -- "$@"
	else
		sudo -u "$u" -- "$@"
	fi
}

# Rootless Podman falls back to vfs on this kind of host: a full copy of the
# image per container. A user without containers and images (or without a
# store at all) gets native rootless overlay; one who has some keeps them,
# and lazaret doctor's storage-driver check says how to switch.
give_overlay() {
	u=$1
	home=$(getent passwd "$u" | cut -d: -f6)
	conf="$home/.config/containers/storage.conf"
	store="$home/.local/share/containers/storage"
	[ -n "$home" ] && [ ! -f "$conf" ] || return 0
	if [ -d "$store" ]; then
		# Anything Podman cannot list counts as something to keep.
		if ! ids=$(cd / && as_user "$u" env HOME="$home" podman ps -aq 2>/dev/null) ||
			! imgs=$(cd / && as_user "$u" env HOME="$home" podman images -aq 2>/dev/null) ||
			[ -n "$ids$imgs" ]; then
			say "$u has Podman containers or images: their storage stays as it is ('lazaret doctor' says how to move to overlay)"
			return 0
		fi
	fi
	say "configuring overlay storage for $u"
	as_user "$u" sh -c "mkdir -p '$home/.config/containers' && printf '[storage]\ndriver = \"overlay\"\n' > '$conf'"
	# An empty vfs store must be reset before the driver changes.
	if [ -d "$store" ]; then
		(cd / && as_user "$u" env HOME="$home" podman system reset --force >/dev/null 2>&1) || true
	fi
}

# The native backend's memory_limit, enforced by the kernel: a directory of
# the cgroup v1 memory hierarchy the user owns, where each sandbox gets a
# cgroup of its own. lazaret finds it by its name (lazaret-USER) when
# runtime.memory_cgroup names none. cgroup v2 is not supported yet; there,
# and without the hierarchy, a native profile needs memory_limit = 0.
# The directory lives in memory: a reboot removes it, and this makes it
# again.
MEMCG=/sys/fs/cgroup/memory
give_memory_cgroup() {
	u=$1
	if [ ! -f "$MEMCG/memory.limit_in_bytes" ]; then
		say "no cgroup v1 memory hierarchy at $MEMCG: the native backend's memory_limit needs memory_limit = 0 for $u"
		return 0
	fi
	d="$MEMCG/lazaret-$u"
	if [ "$(stat -c %U 2>/dev/null "$d")" != "$u" ]; then
		say "making the memory cgroup $d for $u"
		[ -d "$d" ] || $SUDO mkdir "$d"
		$SUDO chown "$u:" "$d"
		$SUDO chmod 0755 "$d"
	fi
	say "$d gives the native backend's memory_limit to the kernel for $u (lazaret finds it by itself)"
}

for u in $cgroup_users; do
	id "$u" >/dev/null 2>&1 || { echo "setup: --memory-cgroup $u: no such user" >&2; exit 1; }
	give_memory_cgroup "$u"
done

invoking=${SUDO_USER:-$(id -un)}
if [ "$invoking" != root ]; then
	add_subids "$invoking"
	give_overlay "$invoking"
	give_memory_cgroup "$invoking"
fi

if [ "$want_test_user" -eq 1 ]; then
	if ! id "$TEST_USER" >/dev/null 2>&1; then
		say "creating test user $TEST_USER"
		$SUDO useradd --create-home --shell /bin/sh --comment "Lazaret integration tests" "$TEST_USER"
	fi
	add_subids "$TEST_USER"
	give_memory_cgroup "$TEST_USER"
	# Rootless Podman falls back to vfs here (a full image copy per
	# container); the test user gets native rootless overlay, as lazaret
	# doctor advises every user.
	home=$(getent passwd "$TEST_USER" | cut -d: -f6)
	conf="$home/.config/containers/storage.conf"
	if [ ! -f "$conf" ]; then
		say "configuring overlay storage for $TEST_USER"
		as_test_user sh -c "mkdir -p '$home/.config/containers' && printf '[storage]\ndriver = \"overlay\"\n' > '$conf'"
		# An existing vfs store must be reset before the driver changes.
		(cd / && as_test_user env HOME="$home" podman system reset --force >/dev/null 2>&1) || true
	fi
	# The TOML unit tests prove float parsing ignores LC_NUMERIC, which
	# needs a locale whose decimal separator is a comma.
	if ! locale -a 2>/dev/null | grep -qix 'de_DE.utf8'; then
		dpkg-query -W -f='${Status}\n' locales 2>/dev/null | grep -q '^install ok installed$' ||
			$SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends locales
		say "generating the de_DE.UTF-8 locale"
		grep -qx 'de_DE.UTF-8 UTF-8' /etc/locale.gen 2>/dev/null ||
			echo 'de_DE.UTF-8 UTF-8' | $SUDO tee -a /etc/locale.gen >/dev/null
		$SUDO locale-gen
	fi
fi
say "host ready"
