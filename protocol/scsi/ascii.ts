// Fixed-width ASCII fields in INQUIRY and VPD data (SPC-5 4.3.1): left
// aligned, padded with spaces, printable characters only.

export function writeAscii(out: Buffer, at: number, width: number, text: string): void {
  const clean = text.replace(/[^\x20-\x7e]/g, '?').slice(0, width);
  out.fill(0x20, at, at + width);
  out.write(clean, at, 'latin1');
}

export function readAscii(b: Buffer, at: number, width: number): string {
  return b
    .subarray(at, Math.min(b.length, at + width))
    .toString('latin1')
    .replace(/[\0 ]+$/, '');
}
