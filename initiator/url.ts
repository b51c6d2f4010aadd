// rblk URLs: rblk://host[:port]/volume?provider=tcp&initiator=...&target=...
// A URL names where a volume is, never how to prove who you are: secrets in a
// URL end up in shell history, `ps` output and logs, so they are refused here.

/** The port rblkd listens on unless configured otherwise (config/schema.ts DEFAULT_PORT). */
export const DEFAULT_PORT = 7471;

/** What an rblk URL names. */
export interface RblkUrl {
  address: string;
  port: number;
  /** The volume in the path, when there is one. */
  volume?: string;
  provider?: string;
  initiatorName?: string;
  targetName?: string;
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
  let u: URL;
  try {
    u = new URL(text);
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
