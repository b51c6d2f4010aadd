// The library takes a Uint8Array wherever it takes a Buffer (docs/initiator.md
// "Buffers"): on entry it becomes a Buffer view of the same memory, no copy,
// so the I/O path below sees one type and a registered view stays registered.

function kindOf(v: unknown): string {
  if (v === null) return 'null';
  if (typeof v !== 'object') return typeof v;
  return (v as { constructor?: { name?: string } }).constructor?.name ?? 'object';
}

/**
 * A Buffer over the same memory as `u` (u itself when it is one). Any other
 * ArrayBuffer view (a DataView, a Float32Array) is taken as its bytes, as
 * Node's own I/O does; anything else is a TypeError (ERR_INVALID_ARG_TYPE)
 * naming the operation and what it was given, not a failure further in.
 */
export function asBuffer(u: Uint8Array, what = 'data', expected = 'a Buffer, a Uint8Array or a RegisteredBuffer'): Buffer {
  if (Buffer.isBuffer(u)) return u;
  if (!ArrayBuffer.isView(u)) {
    throw Object.assign(new TypeError(`${what} must be ${expected}; got ${kindOf(u)}`), { code: 'ERR_INVALID_ARG_TYPE' });
  }
  return Buffer.from(u.buffer, u.byteOffset, u.byteLength);
}
