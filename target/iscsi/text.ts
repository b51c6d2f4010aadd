// iSCSI text data: key=value pairs, each ended by a NUL (RFC 7143 §6.1), as
// login and text requests carry them. Parsing is strict: a pair without '=',
// a key of the wrong form, or a key twice is the initiator's error.

/** RFC 7143 §6.1: keys are at most 63 bytes; values of the standard keys at most 255 (8192 for a few). */
const MAX_KEY = 63;
const MAX_VALUE = 8192;
const KEY_RE = /^[A-Za-z0-9.\-+@_]+$/;

export class TextError extends Error {}

/** Parses a whole text (every continued PDU joined). Pairs keep their order. */
export function parseText(data: Buffer): [string, string][] {
  const out: [string, string][] = [];
  const seen = new Set<string>();
  let start = 0;
  while (start < data.length) {
    let end = data.indexOf(0, start);
    if (end < 0) end = data.length; // The last pair may lack its NUL (some initiators pad with NULs instead).
    if (end > start) {
      const pair = data.toString('utf8', start, end);
      const eq = pair.indexOf('=');
      if (eq <= 0) throw new TextError(`text pair without a key=value form: ${JSON.stringify(pair.slice(0, 80))}`);
      const key = pair.slice(0, eq);
      const value = pair.slice(eq + 1);
      if (key.length > MAX_KEY || !KEY_RE.test(key)) throw new TextError(`malformed key ${JSON.stringify(key.slice(0, 80))}`);
      if (value.length > MAX_VALUE) throw new TextError(`value of ${key} is longer than ${MAX_VALUE} bytes`);
      if (seen.has(key)) throw new TextError(`key ${key} given twice`);
      seen.add(key);
      out.push([key, value]);
    }
    start = end + 1;
  }
  return out;
}

export function encodeText(pairs: readonly (readonly [string, string])[]): Buffer {
  if (pairs.length === 0) return Buffer.alloc(0);
  return Buffer.from(pairs.map(([k, v]) => `${k}=${v}\0`).join(''), 'utf8');
}
