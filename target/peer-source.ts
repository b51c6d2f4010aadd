// The source of a connection, as the per-source pre-login limit counts it
// (limits.pre_login_per_source, docs/operations.md "Connection limits"): the
// peer's address without its port, an IPv4-mapped IPv6 address as plain IPv4,
// so that one host is one source whichever listener and address family it
// reaches. "127.0.0.2:40112", "[::ffff:127.0.0.2]:40112", "::ffff:127.0.0.2"
// are all 127.0.0.2. A peer the transport could not name ("unknown", a loop
// connection's name) is its own source.
import { isIP } from 'node:net';

export function sourceOf(peer: string): string {
  let host = peer;
  const bracketed = /^\[([^\]]+)\](?::\d+)?$/.exec(peer);
  if (bracketed) host = bracketed[1];
  else if (isIP(peer) === 0) {
    const withPort = /^(.*):\d+$/.exec(peer);
    if (withPort && isIP(withPort[1]) !== 0) host = withPort[1];
  }
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(host);
  return mapped ? mapped[1] : host.toLowerCase();
}
