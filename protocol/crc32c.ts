// CRC32C (Castagnoli, reflected polynomial 0x82F63B78): the iSCSI header and
// data digest (RFC 7143 §13.1, docs/iscsi.md "Digests") and the NVMe/TCP
// HDGST/DDGST (NVMe TCP Transport 1.0 §3.6.2.6), shared by both. Slice-by-8 over
// tables built once: eight bytes per step, no allocation per call.
const POLY = 0x82f63b78;
const T = new Int32Array(8 * 256);
for (let n = 0; n < 256; n++) {
  let c = n;
  for (let k = 0; k < 8; k++) c = c & 1 ? (c >>> 1) ^ POLY : c >>> 1;
  T[n] = c;
}
for (let n = 0; n < 256; n++) {
  let c = T[n];
  for (let s = 1; s < 8; s++) {
    c = T[c & 0xff] ^ (c >>> 8);
    T[s * 256 + n] = c;
  }
}

/** Continues a CRC32C over buf[start, end); start with crc = 0 (the pre- and post-inversion are inside). */
export function crc32c(buf: Uint8Array, crc = 0, start = 0, end = buf.length): number {
  let c = ~crc;
  let i = start;
  while (end - i >= 8) {
    const lo = (buf[i] | (buf[i + 1] << 8) | (buf[i + 2] << 16) | (buf[i + 3] << 24)) ^ c;
    const hi = buf[i + 4] | (buf[i + 5] << 8) | (buf[i + 6] << 16) | (buf[i + 7] << 24);
    c =
      T[7 * 256 + (lo & 0xff)] ^
      T[6 * 256 + ((lo >>> 8) & 0xff)] ^
      T[5 * 256 + ((lo >>> 16) & 0xff)] ^
      T[4 * 256 + (lo >>> 24)] ^
      T[3 * 256 + (hi & 0xff)] ^
      T[2 * 256 + ((hi >>> 8) & 0xff)] ^
      T[256 + ((hi >>> 16) & 0xff)] ^
      T[hi >>> 24];
    i += 8;
  }
  while (i < end) c = T[(c ^ buf[i++]) & 0xff] ^ (c >>> 8);
  return ~c >>> 0;
}
