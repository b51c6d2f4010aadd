// The library takes a Uint8Array wherever it takes a Buffer (docs/initiator.md
// "Buffers"): on entry it becomes a Buffer view of the same memory, no copy,
// so the I/O path below sees one type and a registered view stays registered.

/** A Buffer over the same memory as `u` (u itself when it is one). */
export function asBuffer(u: Uint8Array): Buffer {
  return Buffer.isBuffer(u) ? u : Buffer.from(u.buffer, u.byteOffset, u.byteLength);
}
