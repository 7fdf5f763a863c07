#!/bin/sh
# SPDX-License-Identifier: MIT
# Prepare this Debian 12 host for building, testing and running Lazaret.
# Idempotent: every step checks first and changes only what is missing.
# Works as root, or as a normal user with sudo.
#
#   scripts/setup.sh              packages and host preparation for `make run`
#   scripts/setup.sh --test-user  also the unprivileged test user for `make check`
set -eu

TEST_USER=${LAZARET_TEST_USER:-lazaret-test}
want_test_user=0
for a in "$@"; do
	case "$a" in
	--test-user) want_test_user=1 ;;
	*) echo "setup: unknown option $a" >&2; exit 64 ;;
	esac
done

if [ "$(id -u)" -eq 0 ]; then
	SUDO=
else
	command -v sudo >/dev/null 2>&1 || {
		echo "setup: not root and sudo is missing: run 'make' as root, or install sudo" >&2
		exit 1
	}
	SUDO="sudo"
fi

say() { echo "setup: $*"; }

as_test_user() {
	if [ "$(id -u)" -eq 0 ]; then
		runuser -u "$TEST_USER" -- "$@"
	else
		sudo -u "$TEST_USER" -- "$@"
	fi
}

# Build and test tools (dosfstools and fusefat: a FAT Domain Root for the
# State Anchor's bad-file-system test), then what a sandbox launch needs
# (lazaret doctor checks the same list).
PACKAGES="meson ninja-build gcc clang clang-format pkg-config libclang-rt-14-dev
libssl-dev libjansson-dev liblmdb-dev libcmocka-dev libncurses-dev python3-pytest libfuse3-dev fuse3
dosfstools fusefat lmdb-utils tmux
podman runsc runc fuse-overlayfs slirp4netns uidmap sudo busybox-static mmdebstrap git iproute2"

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

invoking=${SUDO_USER:-$(id -un)}
if [ "$invoking" != root ]; then
	add_subids "$invoking"
fi

if [ "$want_test_user" -eq 1 ]; then
	if ! id "$TEST_USER" >/dev/null 2>&1; then
		say "creating test user $TEST_USER"
		$SUDO useradd --create-home --shell /bin/sh --comment "Lazaret integration tests" "$TEST_USER"
	fi
	add_subids "$TEST_USER"
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
