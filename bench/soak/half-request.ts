// The start of a provider's own connection request, announcing 16 bytes of private data
// that never follow (docs/transport.md, "Half-sent connection requests", has both layouts).
// A peer that sends this and stops once held the tcp provider's blocking read on rblkd's
// only thread.
export function halfRequest(provider: string): Buffer {
  if (provider === 'tcp') {
    // version 3, type 0 (request), segment size 16, then seg_no, conn_id, msg_id, conn_data.
    const b = Buffer.alloc(32);
    b.writeUInt8(3, 0);
    b.writeUInt16BE(16, 2);
    b.writeBigUInt64LE(1n, 24);
    return b;
  }
  // sockets: type 0 (request), 3 reserved, port, private data size 16; the address and caps never follow.
  const b = Buffer.alloc(8);
  b.writeUInt16BE(16, 6);
  return b;
}
