/* SPDX-License-Identifier: MIT */
#include <string.h>

#include "images.h"
#include "macro.h"
#include "presets.h"
#include "string-util.h"

/* The agent installed with npm on its first run into /usr/local (a
 * persistent directory, so it stays); later runs start it at once. npm 11
 * runs no package's install scripts unless allowed by name: the agent's
 * own are (Claude Code's postinstall puts its native program in place;
 * without it the command is a stub), its dependencies' are not (issue 42).
 * --prefix: the node image's npm has /usr/local already; the host's npm,
 * which the native backend runs (issue 45), has /usr, read-only there.
 * Without npm (a host without it, on the native backend) one line says
 * so and how to get it. */
#define NPM_AGENT(bin, package, version, what)                                                                         \
        "command = [\"/bin/sh\", \"-c\", \"command -v " bin " >/dev/null 2>&1 || { command -v npm >/dev/null 2>&1 || " \
        "{ echo 'lazaret: installing " what " needs npm, which this system lacks (the native backend uses the "        \
        "host npm: sudo apt-get install npm)' >&2; exit 127; }; echo 'lazaret: installing " what                       \
        " (npm install -g " package "@" version                                                                        \
        "), once: it stays in /usr/local' >&2; npm install -g --prefix=/usr/local --no-audit --no-fund "               \
        "--no-update-notifier --allow-scripts=" package " " package "@" version " >&2 || exit 1; }; exec " bin         \
        " \\\"$@\\\"\", \"" bin "\"]\n"

/* The agents' versions, pinned: a preset's names are checked against the
 * https hosts that version's installed package names (tests/integration/
 * test_presets.py, test_preset_installs_its_agent_once), so a new version
 * is a change here, with that test run and its lists of hosts updated. An
 * agent already installed in a profile's persistent /usr/local (or /opt)
 * stays as it is: remove it there to get the new pin. */
#define CLAUDE_VERSION   "2.1.332"
#define CODEX_VERSION    "0.171.0"
#define GEMINI_VERSION   "0.61.0"
#define OPENCODE_VERSION "1.18.33"
#define AIDER_VERSION    "0.86.2"

/* Names every agent's tools reach: its git host (HTTPS and SSH). */
#define GIT_HOSTS "\"github.com\", \"github.com:22\", \"codeload.github.com\""

const Preset presets[] = {
        {
                .name = "claude",
                .agent = "Claude Code",
                .image_flavour = "node",
                .body = "image = \"" NODE_IMAGE "\"\n" NPM_AGENT(
                        "claude", "@anthropic-ai/claude-code", CLAUDE_VERSION,
                        "Claude Code") "persistent_dirs = [\"/usr/local\"]\n"
                                       "env = { ANTHROPIC_API_KEY = \"env?:ANTHROPIC_API_KEY\", CLAUDE_CONFIG_DIR = "
                                       "\"/root/.claude\" }\n"
                                       "volumes = [{ host = \"{profile_dir}/claude\", container = \"/root/.claude\" "
                                       "}]\n"
                                       "inherit_default_allow = false\n"
                                       /* From what Claude Code 2.1 names and contacts (issue 42):
                                        * its API, sign-in (claude.ai, platform.claude.com,
                                        * console.anthropic.com), its updates and release notes,
                                        * MCP connectors through Anthropic's proxy. */
                                       "allow_domains = [\"api.anthropic.com\", \"claude.ai\", "
                                       "\"platform.claude.com\", \"console.anthropic.com\", "
                                       "\"statsig.anthropic.com\", \"downloads.claude.ai\", "
                                       "\"raw.githubusercontent.com\", \"mcp-proxy.anthropic.com\", "
                                       "\"registry.npmjs.org\", " GIT_HOSTS "]\n",
        },
        {
                .name = "codex",
                .agent = "Codex CLI",
                .image_flavour = "node",
                .body = "image = \"" NODE_IMAGE "\"\n" NPM_AGENT(
                        "codex", "@openai/codex", CODEX_VERSION,
                        "Codex CLI") "persistent_dirs = [\"/usr/local\"]\n"
                                     "env = { OPENAI_API_KEY = \"env?:OPENAI_API_KEY\", CODEX_HOME = \"/root/.codex\" "
                                     "}\n"
                                     "volumes = [{ host = \"{profile_dir}/codex\", container = \"/root/.codex\" }]\n"
                                     "inherit_default_allow = false\n"
                                     /* From what Codex CLI 0.171 names and contacts (issue 42):
                                      * the API, ChatGPT sign-in (auth.openai.com) and the
                                      * ChatGPT plan's backend and model list (chatgpt.com),
                                      * its update check on the npm registry. */
                                     "allow_domains = [\"api.openai.com\", \"auth.openai.com\", \"chatgpt.com\", "
                                     "\"registry.npmjs.org\", " GIT_HOSTS "]\n",
        },
        {
                .name = "aider",
                .agent = "Aider",
                .image_flavour = "debian",
                .body = "image = \"" DEBIAN_IMAGE "\"\n"
                        /* pip needs python3-venv, from Debian's mirror (plain HTTP, signed).
                         * apt's lists and downloads go to /tmp: they are not needed after
                         * the install, and stay out of the persistent layers. (They went
                         * there first because apt, which fetches as _apt, could not
                         * create files in a persistent directory: EOPNOTSUPP, fixed in
                         * the State Anchor with fuse-overlayfs's noacl.) */
                        "command = [\"/bin/sh\", \"-c\", \"command -v aider >/dev/null 2>&1 || { echo 'lazaret: "
                        "installing Aider (python3-venv from Debian, aider-chat " AIDER_VERSION
                        " from PyPI), once: it stays "
                        "in /opt and /usr' >&2; { python3 -c 'import ensurepip' 2>/dev/null || { mkdir -p "
                        "/tmp/lz-apt/lists/partial /tmp/lz-apt/cache/archives/partial && a='apt-get -o "
                        "Dir::State::Lists=/tmp/lz-apt/lists -o Dir::Cache=/tmp/lz-apt/cache' && $a update && "
                        "$a install -y --no-install-recommends python3-venv; }; } && python3 -m venv "
                        "/opt/aider && /opt/aider/bin/pip install aider-chat==" AIDER_VERSION
                        " && ln -sf /opt/aider/bin/aider "
                        "/usr/local/bin/aider; } >&2 || exit 1; exec aider \\\"$@\\\"\", \"aider\"]\n"
                        "persistent_dirs = [\"/usr\", \"/var\", \"/etc\", \"/opt\"]\n"
                        "env = { OPENAI_API_KEY = \"env?:OPENAI_API_KEY\", ANTHROPIC_API_KEY = "
                        "\"env?:ANTHROPIC_API_KEY\" }\n"
                        "volumes = [{ host = \"{profile_dir}/aider\", container = \"/root/.aider\" }]\n"
                        "inherit_default_allow = false\n"
                        /* From what Aider 0.86 names and contacts (issue 42): the two
                         * providers whose keys it is given, the models' context windows
                         * and prices (litellm's list on raw.githubusercontent.com, read at
                         * start), its update check and install (PyPI, Debian). */
                        "allow_domains = [\"api.openai.com\", \"api.anthropic.com\", "
                        "\"raw.githubusercontent.com\", \"pypi.org\", "
                        "\"files.pythonhosted.org\", \"deb.debian.org:80\", " GIT_HOSTS "]\n",
        },
        {
                .name = "gemini",
                .agent = "Gemini CLI",
                .image_flavour = "node",
                .body = "image = \"" NODE_IMAGE "\"\n" NPM_AGENT(
                        "gemini", "@google/gemini-cli", GEMINI_VERSION,
                        "Gemini CLI") "persistent_dirs = [\"/usr/local\"]\n"
                                      "env = { GEMINI_API_KEY = \"env?:GEMINI_API_KEY\", GOOGLE_API_KEY = "
                                      "\"env?:GOOGLE_API_KEY\" }\n"
                                      "volumes = [{ host = \"{profile_dir}/gemini\", container = \"/root/.gemini\" }]\n"
                                      "inherit_default_allow = false\n"
                                      "allow_domains = [\"generativelanguage.googleapis.com\", "
                                      "\"cloudcode-pa.googleapis.com\", "
                                      "\"oauth2.googleapis.com\", \"accounts.google.com\", "
                                      "\"registry.npmjs.org\", " GIT_HOSTS "]\n",
        },
        {
                .name = "opencode",
                .agent = "opencode",
                .image_flavour = "node",
                .body = "image = \"" NODE_IMAGE "\"\n" NPM_AGENT(
                        "opencode", "opencode-ai", OPENCODE_VERSION,
                        "opencode") "persistent_dirs = [\"/usr/local\"]\n"
                                    /* opencode upgrades itself to a newer patch release
                                     * (npm install -g) unless told not to: the pin holds. */
                                    "env = { ANTHROPIC_API_KEY = \"env?:ANTHROPIC_API_KEY\", OPENAI_API_KEY = "
                                    "\"env?:OPENAI_API_KEY\", OPENCODE_DISABLE_AUTOUPDATE = \"1\" }\n"
                                    "volumes = [{ host = \"{profile_dir}/opencode-data\", container = "
                                    "\"/root/.local/share/opencode\" "
                                    "}, { host = \"{profile_dir}/opencode-config\", container = "
                                    "\"/root/.config/opencode\" }]\n"
                                    "inherit_default_allow = false\n"
                                    /* From what opencode 1.18 names and contacts (issue 42):
                                     * its model list (models.opencode.ai, models.dev's
                                     * catalogue; models.dev itself it no longer contacts),
                                     * opencode Zen (opencode.ai), the two providers whose keys
                                     * it is given, provider packages from the npm registry. */
                                    "allow_domains = [\"opencode.ai\", \"models.opencode.ai\", \"api.anthropic.com\", "
                                    "\"api.openai.com\", "
                                    "\"registry.npmjs.org\", " GIT_HOSTS "]\n",
        },
        {
                .name = "shell",
                .agent = "a shell",
                .image_flavour = "debian",
                .body = "image = \"" DEBIAN_IMAGE "\"\n"
                        "command = [\"/bin/bash\", \"-l\"]\n"
                        "persistent_dirs = [\"/usr\", \"/var\", \"/etc\", \"/root\"]\n"
                        "inherit_default_allow = false\n"
                        "allow_domains = [\"deb.debian.org:80\", \"registry.npmjs.org\", \"pypi.org\", "
                        "\"files.pythonhosted.org\", " GIT_HOSTS "]\n",
        },
};
const size_t presets_n = ELEMENTSOF(presets);

const char preset_names[] = "claude, codex, aider, gemini, opencode and shell";

const Preset *preset_find(const char *name) {
        for (size_t i = 0; name && i < presets_n; i++)
                if (streq(presets[i].name, name))
                        return &presets[i];
        return NULL;
}
