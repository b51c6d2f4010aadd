// A host name that does not resolve, said as one. libfabric resolves the
// name itself (fi_getinfo), and when it cannot, reports only that no provider
// fits (FI_ENODATA); the system resolver (dns.lookup, as every other program
// uses) says why (docs/initiator.md "Connecting").
import { lookup } from 'node:dns/promises';
import { isIP } from 'node:net';

const DNS_WORDS: Readonly<Record<string, string>> = {
  ENOTFOUND: 'no such host',
  EAI_NONAME: 'no such host',
  EAI_AGAIN: 'the name server did not answer (try again later)',
  ESERVFAIL: 'the name server failed',
  ENODATA: 'the name has no address',
  ECONNREFUSED: 'the name server refused the query',
  ETIMEOUT: 'the name server did not answer',
};

/** "no such host (ENOTFOUND)" for a resolver error. */
export function dnsWords(e: unknown): string {
  const code = (e as NodeJS.ErrnoException).code ?? 'EAI_FAIL';
  return `${DNS_WORDS[code] ?? 'the lookup failed'} (${code})`;
}

/**
 * Why a connection attempt to `host` failed, in words: the fabric's message,
 * or, when the fabric found no provider (FI_ENODATA) for a name that the
 * system resolver cannot resolve either, that the name does not resolve.
 */
export async function connectFailureText(e: unknown, host: string): Promise<string> {
  const message = e instanceof Error ? e.message : String(e);
  if ((e as { code?: unknown }).code !== 'FI_ENODATA' || isIP(host) !== 0) return message;
  try {
    await lookup(host);
    return message;
  } catch (d) {
    return `cannot resolve host '${host}': ${dnsWords(d)}`;
  }
}
