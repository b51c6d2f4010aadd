// Whether this host can listen on a listener's address, checked when the config is loaded so
// that --check-config and a reload say so on the address's line, instead of a start that fails
// in fi_getinfo or fi_passive_ep without naming the address. A host name is resolved the way
// libfabric resolves it, through getaddrinfo and NSS (`getent ahosts`), and an IP address must
// be one of this host's: the kernel refuses to bind any other unless ip_nonlocal_bind is set.

import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { isIP } from 'node:net';
import { networkInterfaces } from 'node:os';

const WILDCARDS = new Set(['0.0.0.0', '::']);
/** getent waits on DNS; a name that takes longer than this to resolve is reported as such. */
const RESOLVE_TIMEOUT_MS = 5000;

function localAddresses(): string[] {
  return Object.values(networkInterfaces())
    .flatMap((list) => list ?? [])
    .map((a) => a.address);
}

/** 127.0.0.0/8 is all loopback on Linux, not only the address lo lists. */
function isLocal(address: string, local: readonly string[]): boolean {
  return /^127\./.test(address) || address === '::1' || local.includes(address) || nonlocalBind(isIP(address) === 6 ? 6 : 4);
}

/** net.ipv4.ip_nonlocal_bind / net.ipv6.ip_nonlocal_bind: binding any address is allowed. */
function nonlocalBind(family: 4 | 6): boolean {
  try {
    return readFileSync(`/proc/sys/net/ipv${family}/ip_nonlocal_bind`, 'utf8').trim() === '1';
  } catch {
    return false;
  }
}

/** The addresses a host name resolves to; undefined when it could not be asked. */
function resolveName(name: string): { addresses: string[] } | { failure: string } | undefined {
  const r = spawnSync('getent', ['ahosts', name], { encoding: 'utf8', timeout: RESOLVE_TIMEOUT_MS });
  if (r.error) {
    const code = (r.error as NodeJS.ErrnoException).code;
    if (code === 'ETIMEDOUT') return { failure: `did not resolve within ${RESOLVE_TIMEOUT_MS / 1000} s` };
    return undefined; // No getent here: the start will tell.
  }
  // getent exits 2 for a name that is not found (getent(1)).
  if (r.status !== 0) return { failure: 'does not resolve' };
  const addresses = [...new Set(r.stdout.split('\n').map((l) => l.split(/\s+/)[0]).filter((a) => a !== undefined && isIP(a) !== 0))];
  return addresses.length > 0 ? { addresses } : { failure: 'does not resolve' };
}

/** Why this host cannot listen on `address`, or undefined when it can (or cannot tell). */
export function listenAddressProblem(address: string): string | undefined {
  if (WILDCARDS.has(address)) return undefined;
  const local = localAddresses();
  if (isIP(address) !== 0) {
    if (isLocal(address, local)) return undefined;
    return `${address} is not an address of this host (it has ${local.join(', ')})`;
  }
  const found = resolveName(address);
  if (found === undefined) return undefined;
  if ('failure' in found) return `the host name ${address} ${found.failure}`;
  if (found.addresses.some((a) => isLocal(a, local))) return undefined;
  return `the host name ${address} resolves to ${found.addresses.join(', ')}, none of them an address of this host`;
}
