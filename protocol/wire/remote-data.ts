// Read completion by remote CQ data, protocol version 2 (docs/protocol.md
// §12.1): the target's RDMA WRITE of a read's data carries 32 bits of remote
// CQ data, the low 32 bits of the CMD's tag, and that is the command's answer:
// status GOOD, no sense, no residuals, credit delta 1. 32 bits because that is
// what every provider offers (verbs immediate data is 4 bytes; tcp and
// sockets offer 8): an initiator keeps the low 32 bits of its outstanding
// CMD tags distinct.

/** The remote CQ data that answers the CMD with this tag. */
export function remoteDataOf(tag: bigint): number {
  return Number(BigInt.asUintN(32, tag));
}
