// rblk URLs: rblk://host[:port][,host[:port]...]/volume?provider=tcp&initiator=...&target=...
// Several comma-separated addresses are several gateways (paths) to one
// volume, in order of preference (docs/initiator.md "Multipath").
// A URL names where a volume is, never how to prove who you are: secrets in a
// URL end up in shell history, `ps` output and logs, so they are refused here.
import { RBLK_PORT } from '../protocol/wire/constants.js';

/** The port rblkd listens on unless configured otherwise. */
export const DEFAULT_PORT = RBLK_PORT;

/** What an rblk URL names. */
export interface RblkUrl {
  address: string;
  port: number;
  /** The volume in the path, when there is one. */
  volume?: string;
  provider?: string;
  initiatorName?: string;
  targetName?: string;
  /** Every address the URL names, first included, when it names more than one (multipath). */
  paths?: { address: string; port: number }[];
}

const PARAMS: Readonly<Record<string, keyof RblkUrl>> = {
  provider: 'provider',
  initiator: 'initiatorName',
  target: 'targetName',
};

/**
 * Parses `rblk://host[:port][/volume][?provider=P&initiator=N&target=T]`.
 * IPv6 addresses go in brackets (`rblk://[::1]/vol`). Throws RangeError for
 * anything else, including user info or a `secret` parameter.
 */
export function parseRblkUrl(text: string): RblkUrl {
  // WHATWG URL parsing knows one host per URL: split the authority at its commas first.
  const m = /^(rblk:\/\/)([^/?#]*)(.*)$/s.exec(text);
  if (m && m[2].includes(',')) {
    const hosts = m[2].split(',');
    if (hosts.some((h) => h === '')) throw new RangeError(`"${text}": an empty address between commas`);
    const first = parseOne(`${m[1]}${hosts[0]}${m[3]}`, text);
    const paths = hosts.map((h) => {
      const one = parseOne(`${m[1]}${h}`, text);
      return { address: one.address, port: one.port };
    });
    const seen = new Set<string>();
    for (const p of paths) {
      const key = `${p.address}:${p.port}`;
      if (seen.has(key)) throw new RangeError(`"${text}": ${key} is named twice`);
      seen.add(key);
    }
    return { ...first, paths };
  }
  return parseOne(text, text);
}

function parseOne(part: string, text: string): RblkUrl {
  let u: URL;
  try {
    u = new URL(part);
  } catch {
    throw new RangeError(`"${text}" is not a valid URL (expected rblk://host[:port]/volume)`);
  }
  if (u.protocol !== 'rblk:') throw new RangeError(`"${text}" is not an rblk:// URL`);
  if (u.username !== '' || u.password !== '' || u.searchParams.has('secret')) {
    throw new RangeError('rblk URLs carry no secrets: pass the secret in the options, RBLK_SECRET or a secret file');
  }
  const address = u.hostname.replace(/^\[(.*)\]$/, '$1');
  if (address === '') throw new RangeError(`"${text}" names no host`);
  const out: RblkUrl = { address, port: u.port === '' ? DEFAULT_PORT : Number(u.port) };
  const path = u.pathname.replace(/^\//, '');
  if (path !== '') {
    if (path.includes('/')) throw new RangeError(`"${text}": the path must be a single volume name`);
    out.volume = decodeURIComponent(path);
  }
  for (const [key, value] of u.searchParams) {
    const field = PARAMS[key];
    if (field === undefined) throw new RangeError(`"${text}": unknown parameter "${key}" (known: ${Object.keys(PARAMS).join(', ')})`);
    if (value === '') throw new RangeError(`"${text}": parameter "${key}" is empty`);
    if (field === 'provider' || field === 'initiatorName' || field === 'targetName') out[field] = value;
  }
  return out;
}
