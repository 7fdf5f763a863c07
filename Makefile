# SPDX-License-Identifier: MIT
# A thin wrapper over Meson. The two commands of the README:
#   make run    install what is missing, build, run the main job
#   make check  install what is missing, build, run every test
# Both are idempotent and work as root or, through sudo, as a normal user.

BUILD       ?= build
BUILD_CLANG ?= build-clang
BUILD_ASAN  ?= build-asan
BUILD_FUZZ  ?= build-fuzz
FUZZ_SECONDS ?= 60
PYTEST      := /usr/bin/python3 -B -m pytest -p no:cacheprovider
# The integration harness prepares files for the test user and runs lazaret
# as that user, which takes root: a normal user's make check uses sudo here
# (and writes no root-owned caches into the checkout).
AS_ROOT     := $(if $(filter 0,$(shell id -u)),,sudo)
LAZARET     := $(BUILD)/bin/lazaret

# Sanitizer findings fail the test that triggered them.
export ASAN_OPTIONS  := detect_leaks=1:abort_on_error=1:strict_string_checks=1
export UBSAN_OPTIONS := halt_on_error=1:abort_on_error=1:print_stacktrace=1

.PHONY: all not-through-sudo deps deps-test build build-clang build-asan check unit asan integration integration-asan format format-check run bench fuzz clean

all: build

deps:
	scripts/setup.sh

deps-test:
	scripts/setup.sh --test-user

$(BUILD)/build.ninja:
	meson setup $(BUILD)

$(BUILD_CLANG)/build.ninja:
	CC=clang meson setup $(BUILD_CLANG)

$(BUILD_ASAN)/build.ninja:
	CC=clang meson setup $(BUILD_ASAN) -Db_sanitize=address,undefined -Db_lundef=false \
		-Dc_args=-fno-sanitize-recover=all -Dbuildtype=debug

$(BUILD_FUZZ)/build.ninja:
	CC=clang meson setup $(BUILD_FUZZ) -Dfuzz=true -Dtests=false -Dbuildtype=debug -Db_lundef=false

# lazaret finds its helpers beside itself: stage the programs in one
# directory ($(BUILD)/bin, hard links) for make run.
build: $(BUILD)/build.ninja
	@echo "note: linking the static lazaret-escalate prints the linker's warnings that OpenSSL's libcrypto.a"
	@echo "      uses dlopen, getaddrinfo and gethostbyname; expected and harmless: it only talks over a Unix socket"
	ninja -C $(BUILD)
	mkdir -p $(BUILD)/bin
	ln -f $(BUILD)/src/lazaret/lazaret $(BUILD)/src/lazaret/lazaret-init \
		$(BUILD)/src/gitrouter/lazaret-gitrouter $(BUILD)/src/netd/lazaret-netd \
		$(BUILD)/src/escalate/lazaret-escalate $(BUILD)/src/broker/lazaret-broker \
		$(BUILD)/src/relay/lazaret-relay $(BUILD)/src/native/lazaret-native $(BUILD)/bin/

build-clang: $(BUILD_CLANG)/build.ninja
	ninja -C $(BUILD_CLANG)

build-asan: $(BUILD_ASAN)/build.ninja
	ninja -C $(BUILD_ASAN)

# Unit tests, the toml-test corpus and the fuzz corpus replay, with gcc.
unit: build
	meson test -C $(BUILD) --print-errorlogs

# The same under ASan+UBSan with clang.
asan: build-asan
	meson test -C $(BUILD_ASAN) --print-errorlogs

# The Debian image build (about 40 s, from deb.debian.org) runs once, here.
integration: build
	$(AS_ROOT) env LAZARET_TEST_DEBIAN=1 LAZARET_BUILD=$(abspath $(BUILD)) ASAN_OPTIONS=$(ASAN_OPTIONS) UBSAN_OPTIONS=$(UBSAN_OPTIONS) \
		$(PYTEST) -q tests/integration

# The integration tests again, against the ASan+UBSan binary.
integration-asan: build-asan
	$(AS_ROOT) env LAZARET_BUILD=$(abspath $(BUILD_ASAN)) ASAN_OPTIONS=$(ASAN_OPTIONS) UBSAN_OPTIONS=$(UBSAN_OPTIONS) \
		$(PYTEST) -q tests/integration

C_SOURCES = $(shell find src tests fuzz -name '*.[ch]' -not -path 'tests/data/*')

# House style is .clang-format; make format applies it.
format:
	clang-format -i $(C_SOURCES)

format-check:
	clang-format --dry-run --Werror $(C_SOURCES)

check: deps-test
	$(MAKE) format-check build build-clang
	$(MAKE) unit asan integration integration-asan

# The main job: check the host, write and validate a starter configuration
# (your own ~/.config/lazaret/config.toml, written only when there is none),
# put lazaret on your PATH (a symbolic link in ~/.local/bin to this build),
# build the Debian image once, and open the starter profile's sandbox on
# this directory (a shell when run from a terminal). Run it as yourself:
# it asks sudo, itself, only to install packages; run through sudo it would
# be root's and leave root-owned files in your checkout, so it refuses.
CONFIG_DIR := $(or $(XDG_CONFIG_HOME),$(HOME)/.config)/lazaret
STARTER := $(CONFIG_DIR)/config.toml
BIN_DIR := $(or $(XDG_BIN_HOME),$(HOME)/.local/bin)
run: not-through-sudo deps build
	@echo "== lazaret doctor"
	$(LAZARET) doctor
	@echo "== lazaret on your PATH: $(BIN_DIR)/lazaret -> $(abspath $(LAZARET))"
	@mkdir -p $(BIN_DIR)
	@if [ -e $(BIN_DIR)/lazaret ] && [ ! -L $(BIN_DIR)/lazaret ]; then \
		echo "   $(BIN_DIR)/lazaret is a file of your own: left as it is; this build is $(abspath $(LAZARET))"; \
	else ln -sfn $(abspath $(LAZARET)) $(BIN_DIR)/lazaret; fi
	@case ":$$PATH:" in *":$(BIN_DIR):"*) ;; \
	*) echo "   $(BIN_DIR) is not on your PATH yet: Debian's ~/.profile adds it at your next login, or run"; \
	   echo "   export PATH=\"$(BIN_DIR):\$$PATH\"";; esac
	@echo "== your configuration, $(STARTER) (lazaret init writes a starter only when there is none), validated and shown"
	[ -f $(STARTER) ] || $(LAZARET) init
	$(LAZARET) config check
	$(LAZARET) config show
	@echo "== the Debian image (built once, offline from Debian's mirror)"
	podman image exists localhost/lazaret/debian:bookworm || $(LAZARET) image build debian
	@echo "== lazaret run (exit the shell to tear the sandbox down)"
	$(LAZARET) --workspace $(CURDIR) run

# sudo make run would build and run as root in your checkout.
not-through-sudo:
	@if [ "$$(id -u)" = 0 ] && [ -n "$$SUDO_USER" ] && [ "$$SUDO_USER" != root ]; then \
		echo "make run: run it as $$SUDO_USER, without sudo: 'make run'. It asks for sudo itself, only to install"; \
		echo "          packages; as root it would be root's sandbox and leave root-owned files in this checkout."; \
		exit 1; fi

# Benchmarks (rootless, as the test user): start-up against bare Podman,
# and git through the router against a plain bind mount. Every one runs,
# each printing its figures; the target fails at the end, naming those
# over their budgets.
BENCHES = run git net state workspace install escalate egress events tui native native-run up
bench: deps-test build
	@over=; for b in $(BENCHES); do \
		$(AS_ROOT) bench/bench-$$b.py --build $(BUILD) || over="$$over $$b"; \
	done; \
	if [ -n "$$over" ]; then echo "bench: over budget or failed:$$over"; exit 1; fi

fuzz: $(BUILD_FUZZ)/build.ninja
	ninja -C $(BUILD_FUZZ)
	set -e; for f in fuzz/corpus/*/; do \
		name=$$(basename $$f); work=$(BUILD_FUZZ)/corpus-$$name; mkdir -p $$work; \
		echo "== $$name for $(FUZZ_SECONDS)s"; \
		$(BUILD_FUZZ)/fuzz/$$name -max_total_time=$(FUZZ_SECONDS) -max_len=65536 $$work $$f; \
	done

clean:
	rm -rf $(BUILD) $(BUILD_CLANG) $(BUILD_ASAN) $(BUILD_FUZZ)
