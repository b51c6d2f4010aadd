// The seam between a remote volume and the ways it is exposed locally (NBD
// export, FUSE file): byte offsets, async, nothing about SCSI or the fabric.
// initiator/volume.ts implements it over an rblk session; tests implement it in
// memory.

export interface BlockDeviceInfo {
  /** Bytes. */
  readonly size: number;
  /** Logical block size: 512 or 4096. Offsets and lengths are multiples of it. */
  readonly blockSize: number;
  readonly readOnly: boolean;
  /** discard() really deallocates (thin provisioning). */
  readonly canDiscard: boolean;
  /** Largest single transfer the device takes; callers split larger requests. */
  readonly maxTransfer: number;
}

/** One run of blocks with the same allocation status, in bytes. */
export interface AllocationExtent {
  offset: number;
  length: number;
  /** Deallocated blocks read as zeroes; anchored ones hold no data either but keep their resources. */
  status: 'mapped' | 'deallocated' | 'anchored';
}

/** Memory a device lends an exporter for its own buffers (BlockDevice.allocate). */
export interface DeviceMemory {
  readonly buffer: Buffer;
  /** Gives it back; the exporter never touches `buffer` afterwards. */
  release(): void;
}

export interface BlockDevice extends BlockDeviceInfo {
  /** Reads length bytes at offset into a new buffer. */
  read(offset: number, length: number): Promise<Buffer>;
  /**
   * Optional: fills `into`, memory the caller owns, from offset, so exporters
   * can reuse their buffers.
   */
  readInto?(offset: number, into: Buffer): Promise<void>;
  /**
   * Optional: memory the device moves data to and from without a copy, for an
   * exporter's buffers. It is the exporter's until it calls release(), however
   * long it holds data (a write to send again after a lost connection, a
   * reply still being written to a socket): an rblk volume's is
   * session.allocate()'s, registered on each connection that carries its I/O
   * and kept across reconnects (docs/nbd.md "Memory").
   */
  allocate?(length: number): DeviceMemory;
  /** Writes buf at offset; fua: durable before it resolves. */
  write(offset: number, buf: Buffer, opts?: { fua?: boolean }): Promise<void>;
  /** Makes every completed write durable. */
  flush(): Promise<void>;
  /** Deallocates; the range then reads as zeroes. */
  discard(offset: number, length: number): Promise<void>;
  writeZeroes(offset: number, length: number, opts?: { unmap?: boolean }): Promise<void>;
  /**
   * Optional: the allocation status from offset, as consecutive runs that
   * start at offset and may end before offset + length (never after it).
   * Exporters offer holes (NBD base:allocation) only when it is there.
   */
  lbaStatus?(offset: number, length: number): Promise<AllocationExtent[]>;
}

/**
 * Errors a BlockDevice rejects with carry a stable code; exporters map them to
 * their own (NBD errno values, FUSE -errno).
 */
export type BlockErrorCode =
  | 'LBA_OUT_OF_RANGE'
  | 'WRITE_PROTECTED'
  | 'MEDIUM_ERROR'
  | 'NO_SPACE'
  | 'NOT_SUPPORTED'
  | 'INVALID'
  | 'CONNECTION_LOST'
  | 'IO_ERROR';

export interface BlockError extends Error {
  code: BlockErrorCode;
}
