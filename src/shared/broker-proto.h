/* SPDX-License-Identifier: MIT */
#pragma once

/* Between lazaret-relay (inside the sandbox) and lazaret-broker (the
 * Domain's, on the host), over the Unix stream socket the sandbox sees at
 * BROKER_SOCKET_PATH (issue 18).
 *
 * The relay sends one request line, at most BROKER_REQUEST_MAX bytes with
 * its "\n", within BROKER_REQUEST_TIMEOUT_SEC of connecting:
 *
 *   CONNECT <host> <port> <via>\n
 *
 * host is a name as the client wrote it (the broker canonicalizes and
 * checks it, domain-rule.h), or an IPv4 or IPv6 literal (without
 * brackets); port is decimal 1..65535; via is how the client asked
 * (BROKER_VIA_*), for the record and for the server-name check. Single
 * spaces, no other bytes; anything else is refused as bad-request.
 *
 * The broker answers with one line:
 *
 *   OK <address> <port>\n            connected to that validated address
 *   ERR <code> <message>\n           refused; code is one of BROKER_ERR_*,
 *                                    message one line of printable ASCII
 *
 * and after OK the connection is an opaque byte stream both ways, until
 * either side closes or it is idle for the broker's idle timeout. The
 * broker never trusts the relay: the relay runs where the agent does, and
 * the agent may speak this protocol itself. */

#define BROKER_SOCKET_DIR          "/run/lazaret/broker"
#define BROKER_SOCKET_PATH         BROKER_SOCKET_DIR "/sock"
#define BROKER_REQUEST_MAX         600u
#define BROKER_REQUEST_TIMEOUT_SEC 10u

/* The relay's fixed ports on the sandbox's 127.0.0.1. */
#define RELAY_HTTP_PORT  3128u /* HTTP CONNECT and plain-HTTP absolute-form */
#define RELAY_SOCKS_PORT 1080u /* SOCKS5, host names only, no authentication */
/* The same, as the proxy variables of a session name them. */
#define RELAY_HTTP_URL  "http://127.0.0.1:3128"
#define RELAY_SOCKS_URL "socks5h://127.0.0.1:1080"

#define BROKER_VIA_CONNECT "connect" /* HTTP CONNECT */
#define BROKER_VIA_HTTP    "http" /* plain HTTP, absolute-form request */
#define BROKER_VIA_SOCKS   "socks" /* SOCKS5 CONNECT */
#define BROKER_VIA_STREAM  "stream" /* lazaret-relay --connect (SSH's ProxyCommand) and --probe */

#define BROKER_ERR_BAD_REQUEST "bad-request" /* malformed request line */
#define BROKER_ERR_BAD_NAME    "bad-name" /* not a canonical-able host name */
#define BROKER_ERR_NAME        "name-not-listed"
#define BROKER_ERR_PORT        "port-not-listed" /* the name is listed, on other ports */
#define BROKER_ERR_IP_LITERAL  "ip-literal" /* an address no CIDR rule permits */
#define BROKER_ERR_DNS         "dns-failed" /* no answer, NXDOMAIN, SERVFAIL, timeout */
#define BROKER_ERR_ADDRESS     "address-denied" /* an answer lies in a denied range (rebinding) */
#define BROKER_ERR_CONNECT     "connect-failed"
#define BROKER_ERR_LIMIT       "limit" /* too many connections for this Domain */
#define BROKER_ERR_TIMEOUT     "timeout" /* the request line did not come in time */
/* Not an answer (it comes after OK): the reason the record gives when the
 * server-name check (check_server_name) closed a connection whose TLS
 * server name or HTTP Host differed from the name asked for. */
#define BROKER_ERR_SERVER_NAME "server-name-mismatch"
