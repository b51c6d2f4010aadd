// What happened when the CLI could not reach a target, in words: the host is
// resolved first (dns.lookup, as every other program does), so a DNS failure
// says so instead of reaching libfabric as "no provider offers FI_EP_MSG"; a
// refused or unreachable connection names HOST:PORT and keeps the fabric code
// (docs/cli.md "Errors").
import { lookup } from 'node:dns/promises';
import { isIP } from 'node:net';
import { RblkError } from '../errors.js';
import { dnsWords } from '../host-lookup.js';

/** `host:port`, with IPv6 in brackets. */
function where(host: string, port: number): string {
  return `${host.includes(':') ? `[${host}]` : host}:${port}`;
}

/**
 * The address to connect to: `host` itself when it is an IP address, else
 * its first address from the resolver. A name that does not resolve rejects
 * with LOGIN_FAILED saying so, with the resolver's code.
 */
export async function resolveHost(host: string, port: number): Promise<string> {
  if (isIP(host) !== 0) return host;
  try {
    return (await lookup(host)).address;
  } catch (e) {
    throw new RblkError('LOGIN_FAILED', `cannot resolve host '${host}' (for ${where(host, port)}): ${dnsWords(e)}`, { cause: e });
  }
}

/** Fabric codes of a connection attempt that reached nothing, and what each means to a user. */
const CONNECT_WORDS: Readonly<Record<string, (at: string, port: number) => string>> = {
  // Also what the sockets provider gets from a listener of another provider (tcp's): the port is open, the handshake is not its.
  FI_ECONNREFUSED: (at, port) => `connection refused at ${at}: nothing listens on port ${port} there, or not with this provider (is rblkd running, on that port, with the same provider?)`,
  // libfabric 1.17's tcp provider: the TCP connection was made, but the peer's first bytes were not
  // its connection header (another service on the port, or an HTTP proxy or firewall answering
  // for the address); measured against an HTTP server and against this sandbox's egress proxy.
  FI_ENOPROTOOPT: (at) =>
    `${at} answered, but not as an rblk target: what came back was not libfabric's connection handshake (another service on that port, a proxy or firewall answering for the host, or another provider)`,
  // The same provider, when the peer accepted and then closed without answering.
  FI_EINPROGRESS: (at) => `${at} accepted the connection and closed it before answering (is that an rblk target, and is the provider the same?)`,
  FI_EHOSTUNREACH: (at) => `${at} is unreachable: no route to the host`,
  FI_ENETUNREACH: (at) => `${at} is unreachable: no route to its network`,
  FI_ETIMEDOUT: (at) => `${at} did not answer: the connection attempt timed out (is that an rblk target, and is the provider the same?)`,
  FI_ECONNRESET: (at) => `${at} reset the connection during login`,
};

/** Why libfabric offers no endpoint of `provider` on this host, and what to use instead. */
function noProvider(provider: string): string {
  if (provider === 'verbs') {
    return "the verbs provider finds no RDMA device on this host (no InfiniBand, RoCE or iWARP NIC, or its driver is not loaded: ibv_devices lists them): use --provider tcp (or ?provider=tcp in the URL), rblk's protocol in software over TCP, with a target that listens on tcp";
  }
  return `libfabric offers no usable '${provider}' provider on this host (fi_info -l lists those it has): use --provider tcp (or ?provider=tcp in the URL)`;
}

/**
 * A login failure that is a connection failure, said as one: "connection
 * refused at HOST:PORT (FI_ECONNREFUSED)". Anything else comes back unchanged.
 * `host` is the name the user gave; `address`, what it resolved to.
 */
export function explainConnectFailure(e: unknown, host: string, address: string, port: number): unknown {
  if (!(e instanceof RblkError) || e.code !== 'LOGIN_FAILED') return e;
  const m = /cannot connect to [^ ]+: .*\((FI_E[A-Z]+)\)$/.exec(e.message);
  if (m === null) return e;
  const code = m[1];
  // A provider that libfabric does not offer here is this host's doing, not the target's (native/src/core/domain.cc's message).
  const provider = /no libfabric provider '([^']+)' offers/.exec(e.message)?.[1];
  if (code === 'FI_ENODATA' && provider !== undefined) return new RblkError('LOGIN_FAILED', `${noProvider(provider)} (${code})`, { cause: e });
  const words = CONNECT_WORDS[code];
  if (words === undefined) return e;
  const at = where(host, port) + (address === host ? '' : ` (${address})`);
  return new RblkError('LOGIN_FAILED', `${words(at, port)} (${code})`, { cause: e });
}
