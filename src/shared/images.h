/* SPDX-License-Identifier: MIT */
#pragma once

/* The images `lazaret image build` makes, named where the presets and the
 * builder both need them. */
#define DEBIAN_SUITE "bookworm"
#define DEBIAN_IMAGE "localhost/lazaret/debian:" DEBIAN_SUITE

/* Node.js for the node flavour: an LTS line whose fetch honours
 * NODE_USE_ENV_PROXY (through the relay). */
#define NODE_VERSION "24.22.3"
#define NODE_IMAGE   "localhost/lazaret/node:" NODE_VERSION
