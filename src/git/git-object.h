/* SPDX-License-Identifier: MIT */
#pragma once

/* Checking what the sandbox puts into a host repository's object store
 * (issue 40). Host git trusts an object file's name: it reads a pack before
 * loose objects and never re-hashes a blob for checkout, diff or log, so a
 * file filed under the ID of an existing object would be taken for it. The
 * git router therefore admits an object file only when its content is what
 * its name says (git_policy_object_file() names the kinds): a loose object
 * here, a pack index by the host's own `git index-pack --verify`, which
 * re-hashes every object of the pack (the router runs it). */

/* Check that fd holds a loose object whose ID is hex: one zlib stream of
 * "<type> <size>\0" (type blob, tree, commit or tag; size in canonical
 * decimal) and exactly size bytes, nothing after the stream, whose SHA-1
 * (hex of 40 digits) or SHA-256 (64 digits) is hex. Reads fd from offset 0
 * with pread; the file's own offset is untouched.
 * Returns 0; -EBADMSG when the content is not that object; -EINVAL for a
 * hex that is no object ID; -ENOMEM; -errno from reading fd. */
int git_object_verify_loose(int fd, const char *hex);
