// The ublk driver's user-space ABI (Linux 6.0+, include/uapi/linux/ublk_cmd.h):
// the control commands a server sends to /dev/ublk-control, the per-tag I/O
// descriptors the driver fills in a mapped array of /dev/ublkcN, and the
// FETCH/COMMIT commands a queue answers them with. Plain little-endian layouts
// (the structs are naturally aligned; the kernel runs in the host's byte order,
// and every architecture rblk builds for is little-endian). test/ublk checks
// each offset and size here against the system's own header with the C compiler.
// The design that uses them: docs/ublk.md.

/** Control commands (ublksrv_ctrl_cmd in an io_uring URING_CMD to /dev/ublk-control). */
export const UblkCtrl = {
  GET_QUEUE_AFFINITY: 0x01,
  GET_DEV_INFO: 0x02,
  ADD_DEV: 0x04,
  DEL_DEV: 0x05,
  START_DEV: 0x06,
  STOP_DEV: 0x07,
  SET_PARAMS: 0x08,
  GET_PARAMS: 0x09,
  START_USER_RECOVERY: 0x10,
  END_USER_RECOVERY: 0x11,
} as const;

/** I/O commands (ublksrv_io_cmd in a URING_CMD to /dev/ublkcN), one outstanding per tag. */
export const UblkIoCmd = {
  FETCH_REQ: 0x20,
  COMMIT_AND_FETCH_REQ: 0x21,
  NEED_GET_DATA: 0x22,
} as const;

/** Operations in ublksrv_io_desc.op_flags bits 0-7. */
export const UblkOp = {
  READ: 0,
  WRITE: 1,
  FLUSH: 2,
  DISCARD: 3,
  WRITE_SAME: 4,
  WRITE_ZEROES: 5,
} as const;

/** Flags in ublksrv_io_desc.op_flags, as bit positions of the whole word. */
export const UblkIoFlag = {
  FAILFAST_DEV: 1 << 8,
  FAILFAST_TRANSPORT: 1 << 9,
  FAILFAST_DRIVER: 1 << 10,
  META: 1 << 11,
  FUA: 1 << 13,
  NOUNMAP: 1 << 15,
  SWAP: 1 << 16,
} as const;

/** Device feature flags (ublksrv_ctrl_dev_info.flags), asked for at ADD_DEV. */
export const UblkFeature = {
  SUPPORT_ZERO_COPY: 1n << 0n,
  URING_CMD_COMP_IN_TASK: 1n << 1n,
  NEED_GET_DATA: 1n << 2n,
  USER_RECOVERY: 1n << 3n,
  USER_RECOVERY_REISSUE: 1n << 4n,
} as const;

/** ublk_param_basic.attrs. */
export const UblkAttr = {
  READ_ONLY: 1 << 0,
  ROTATIONAL: 1 << 1,
  VOLATILE_CACHE: 1 << 2,
  FUA: 1 << 3,
} as const;

export const UBLK_PARAM_TYPE_BASIC = 1 << 0;
export const UBLK_PARAM_TYPE_DISCARD = 1 << 1;

/** mmap offset of a queue's descriptor array on /dev/ublkcN. */
export const UBLKSRV_CMD_BUF_OFFSET = 0;
export const UBLK_MAX_QUEUE_DEPTH = 4096;
/** Device states (ublksrv_ctrl_dev_info.state). */
export const UblkState = { DEAD: 0, LIVE: 1, QUIESCED: 2 } as const;

/** Sizes and field offsets of the structs, in bytes (checked against the C header by test/ublk). */
export const UBLK_LAYOUT = {
  ctrlCmd: { size: 32, dev_id: 0, queue_id: 4, len: 6, addr: 8, data: 16 },
  devInfo: { size: 64, nr_hw_queues: 0, queue_depth: 2, state: 4, max_io_buf_bytes: 8, dev_id: 12, ublksrv_pid: 16, flags: 24, ublksrv_flags: 32 },
  ioDesc: { size: 24, op_flags: 0, nr_sectors: 4, start_sector: 8, addr: 16 },
  ioCmd: { size: 16, q_id: 0, tag: 2, result: 4, addr: 8 },
  params: { size: 64, len: 0, types: 4, basic: 8, discard: 40 },
  paramBasic: { size: 32, attrs: 0, logical_bs_shift: 4, physical_bs_shift: 5, io_opt_shift: 6, io_min_shift: 7, max_sectors: 8, chunk_sectors: 12, dev_sectors: 16, virt_boundary_mask: 24 },
  paramDiscard: { size: 20, discard_alignment: 0, discard_granularity: 4, max_discard_sectors: 8, max_write_zeroes_sectors: 12, max_discard_segments: 16 },
} as const;

export interface UblkCtrlCmd {
  devId: number;
  /** 0xffff (-1) when the command is not for one queue. */
  queueId: number;
  /** Bytes at addr (the buffer the command reads or fills). */
  len: number;
  addr: bigint;
  data: [bigint, bigint];
}

export function encodeCtrlCmd(c: UblkCtrlCmd): Buffer {
  const L = UBLK_LAYOUT.ctrlCmd;
  const b = Buffer.alloc(L.size);
  b.writeUInt32LE(c.devId >>> 0, L.dev_id);
  b.writeUInt16LE(c.queueId & 0xffff, L.queue_id);
  b.writeUInt16LE(c.len, L.len);
  b.writeBigUInt64LE(c.addr, L.addr);
  b.writeBigUInt64LE(c.data[0], L.data);
  b.writeBigUInt64LE(c.data[1], L.data + 8);
  return b;
}

export interface UblkDevInfo {
  nrHwQueues: number;
  queueDepth: number;
  state: number;
  maxIoBufBytes: number;
  /** 0xffffffff (-1) at ADD_DEV: the driver picks the N of /dev/ublkbN. */
  devId: number;
  ublksrvPid: number;
  flags: bigint;
  ublksrvFlags: bigint;
}

export function encodeDevInfo(d: UblkDevInfo): Buffer {
  const L = UBLK_LAYOUT.devInfo;
  const b = Buffer.alloc(L.size);
  b.writeUInt16LE(d.nrHwQueues, L.nr_hw_queues);
  b.writeUInt16LE(d.queueDepth, L.queue_depth);
  b.writeUInt16LE(d.state, L.state);
  b.writeUInt32LE(d.maxIoBufBytes, L.max_io_buf_bytes);
  b.writeUInt32LE(d.devId >>> 0, L.dev_id);
  b.writeInt32LE(d.ublksrvPid, L.ublksrv_pid);
  b.writeBigUInt64LE(d.flags, L.flags);
  b.writeBigUInt64LE(d.ublksrvFlags, L.ublksrv_flags);
  return b;
}

export function decodeDevInfo(b: Buffer): UblkDevInfo {
  const L = UBLK_LAYOUT.devInfo;
  if (b.length < L.size) throw new RangeError(`ublksrv_ctrl_dev_info is ${L.size} bytes, got ${b.length}`);
  return {
    nrHwQueues: b.readUInt16LE(L.nr_hw_queues),
    queueDepth: b.readUInt16LE(L.queue_depth),
    state: b.readUInt16LE(L.state),
    maxIoBufBytes: b.readUInt32LE(L.max_io_buf_bytes),
    devId: b.readUInt32LE(L.dev_id),
    ublksrvPid: b.readInt32LE(L.ublksrv_pid),
    flags: b.readBigUInt64LE(L.flags),
    ublksrvFlags: b.readBigUInt64LE(L.ublksrv_flags),
  };
}

export interface UblkParams {
  basic: {
    attrs: number;
    logicalBsShift: number;
    physicalBsShift: number;
    ioOptShift: number;
    ioMinShift: number;
    maxSectors: number;
    chunkSectors: number;
    devSectors: bigint;
    virtBoundaryMask: bigint;
  };
  discard?: {
    discardAlignment: number;
    discardGranularity: number;
    maxDiscardSectors: number;
    maxWriteZeroesSectors: number;
    maxDiscardSegments: number;
  };
}

/** ublk_params for SET_PARAMS: len is the whole struct, types says which parts count. */
export function encodeParams(p: UblkParams): Buffer {
  const L = UBLK_LAYOUT.params;
  const B = UBLK_LAYOUT.paramBasic;
  const D = UBLK_LAYOUT.paramDiscard;
  const b = Buffer.alloc(L.size);
  b.writeUInt32LE(L.size, L.len);
  b.writeUInt32LE(UBLK_PARAM_TYPE_BASIC | (p.discard ? UBLK_PARAM_TYPE_DISCARD : 0), L.types);
  const s = p.basic;
  b.writeUInt32LE(s.attrs, L.basic + B.attrs);
  b.writeUInt8(s.logicalBsShift, L.basic + B.logical_bs_shift);
  b.writeUInt8(s.physicalBsShift, L.basic + B.physical_bs_shift);
  b.writeUInt8(s.ioOptShift, L.basic + B.io_opt_shift);
  b.writeUInt8(s.ioMinShift, L.basic + B.io_min_shift);
  b.writeUInt32LE(s.maxSectors, L.basic + B.max_sectors);
  b.writeUInt32LE(s.chunkSectors, L.basic + B.chunk_sectors);
  b.writeBigUInt64LE(s.devSectors, L.basic + B.dev_sectors);
  b.writeBigUInt64LE(s.virtBoundaryMask, L.basic + B.virt_boundary_mask);
  if (p.discard) {
    const d = p.discard;
    b.writeUInt32LE(d.discardAlignment, L.discard + D.discard_alignment);
    b.writeUInt32LE(d.discardGranularity, L.discard + D.discard_granularity);
    b.writeUInt32LE(d.maxDiscardSectors, L.discard + D.max_discard_sectors);
    b.writeUInt32LE(d.maxWriteZeroesSectors, L.discard + D.max_write_zeroes_sectors);
    b.writeUInt16LE(d.maxDiscardSegments, L.discard + D.max_discard_segments);
  }
  return b;
}

export interface UblkIoDesc {
  op: number;
  /** op_flags bits 8-31, in place (compare with UblkIoFlag). */
  flags: number;
  nrSectors: number;
  startSector: bigint;
  addr: bigint;
}

/** The descriptor of `tag` in a queue's mapped array. */
export function decodeIoDesc(array: Buffer, tag: number): UblkIoDesc {
  const L = UBLK_LAYOUT.ioDesc;
  const at = tag * L.size;
  if (!Number.isInteger(tag) || tag < 0 || at + L.size > array.length) throw new RangeError(`no descriptor for tag ${tag} in ${array.length} bytes`);
  const opFlags = array.readUInt32LE(at + L.op_flags);
  return {
    op: opFlags & 0xff,
    flags: opFlags & ~0xff,
    nrSectors: array.readUInt32LE(at + L.nr_sectors),
    startSector: array.readBigUInt64LE(at + L.start_sector),
    addr: array.readBigUInt64LE(at + L.addr),
  };
}

export function encodeIoDesc(d: UblkIoDesc): Buffer {
  const L = UBLK_LAYOUT.ioDesc;
  const b = Buffer.alloc(L.size);
  b.writeUInt32LE(((d.op & 0xff) | (d.flags & ~0xff)) >>> 0, L.op_flags);
  b.writeUInt32LE(d.nrSectors, L.nr_sectors);
  b.writeBigUInt64LE(d.startSector, L.start_sector);
  b.writeBigUInt64LE(d.addr, L.addr);
  return b;
}

export interface UblkIoCommand {
  qId: number;
  tag: number;
  /** Bytes done, or -errno; meaningful for COMMIT_AND_FETCH_REQ only. */
  result: number;
  /** The tag's data buffer in the server's address space (FETCH and COMMIT). */
  addr: bigint;
}

export function encodeIoCmd(c: UblkIoCommand): Buffer {
  const L = UBLK_LAYOUT.ioCmd;
  const b = Buffer.alloc(L.size);
  b.writeUInt16LE(c.qId, L.q_id);
  b.writeUInt16LE(c.tag, L.tag);
  b.writeInt32LE(c.result, L.result);
  b.writeBigUInt64LE(c.addr, L.addr);
  return b;
}

export function decodeIoCmd(b: Buffer): UblkIoCommand {
  const L = UBLK_LAYOUT.ioCmd;
  return { qId: b.readUInt16LE(L.q_id), tag: b.readUInt16LE(L.tag), result: b.readInt32LE(L.result), addr: b.readBigUInt64LE(L.addr) };
}

/** Bytes of a queue's descriptor array to mmap: depth descriptors, rounded up to pages. */
export function descArrayBytes(queueDepth: number, pageSize = 4096): number {
  const raw = queueDepth * UBLK_LAYOUT.ioDesc.size;
  return Math.ceil(raw / pageSize) * pageSize;
}

/**
 * mmap offset of queue qId's descriptor array: each queue's array has room
 * for UBLK_MAX_QUEUE_DEPTH descriptors, rounded up to pages, whatever the
 * device's own depth (the driver finds the queue from the offset).
 */
export function descArrayOffset(qId: number, pageSize = 4096): number {
  return UBLKSRV_CMD_BUF_OFFSET + qId * descArrayBytes(UBLK_MAX_QUEUE_DEPTH, pageSize);
}
