// One logged-in connection to a target (docs/protocol.md §4, §7, §11): the
// initiator's half of login and authentication, credits, tags, command
// submission with its data descriptors, task management, keep-alive and
// logout. Volumes and sessions are built on it.
// Over 600 lines: login, credits and tags, the JavaScript command path and the
// native queue's (initiator-queue.h) share the one credit count and tag space
// of the connection (docs/protocol.md §11), so they live in one class.
import {
  capsuleBuffer,
  checkLoginGrant,
  DataDirection,
  DataFormat,
  decodeCapsule,
  initiatorProof,
  DEFAULT_TARGET_NAME,
  LoginRejectReason,
  LogoutReason,
  newNonce,
  Opcode,
  PROTOCOL_LIMITS,
  ProtocolError,
  REMOTE_DATA_VERSION,
  TRAIN_VERSION,
  remoteDataOf,
  sessionLimits,
  TaskAttribute,
  verifyTargetProof,
  type Capsule,
  type CommandData,
  type LoginRequest,
  type LoginResponse,
  type ResponseCapsule,
  type TaskFunction,
  type WireLimits,
} from '../protocol/wire/index.js';
import { QueueResult, SUBMISSION_WORDS, SUBMIT_FUA, SUBMIT_WRITE, type InitiatorQueue } from '../native/initiator-queue.js';
import { connectFailureText } from './host-lookup.js';
import type { InitiatorConnection, InitiatorTransport, IoBuffer, SessionMemory } from './transport/transport.js';

export interface LoginOptions {
  address: string;
  port: number;
  provider?: string;
  initiatorName: string;
  targetName: string;
  /** The initiator's secret; with it the login is mutually authenticated. */
  secret?: string;
  queueDepth?: number;
  /** Largest I/O this connection moves in one command (the I/O pool's chunk). */
  maxIo?: number;
  immediateDataSize?: number;
  connectTimeoutMs?: number;
  /** The highest protocol version to ask for (docs/protocol.md §3); default the highest this code speaks. */
  protocolVersion?: number;
  /** READ and WRITE on registered memory through the native queue where the transport has one (default true). */
  fastPath?: boolean;
  /** Spin on the completion queue this long before the loop sleeps (ConnectOptions.busyPollMicros). */
  busyPollMicros?: number;
}

/** Why a login failed, with the target's reason when it gave one. */
export class LoginError extends Error {
  constructor(
    message: string,
    readonly code: 'LOGIN_REJECTED' | 'AUTH_FAILED' | 'CONNECT_FAILED' | 'PROTOCOL_ERROR' | 'TIMEOUT',
    readonly reason?: number,
  ) {
    super(message);
    this.name = 'LoginError';
  }
}

/** The connection died under a command: the caller may retry elsewhere. */
export class TransportError extends Error {
  readonly code = 'CONNECTION_LOST';
  constructor(message: string) {
    super(message);
    this.name = 'TransportError';
  }
}

export interface CommandResult {
  status: number;
  sense: Buffer;
  /** Bytes of data-in the target placed (descriptor length minus underflow). */
  dataIn: number;
  response: ResponseCapsule;
}

export interface CommandRequest {
  lun: number;
  cdb: Buffer;
  /** Data-out: immediate bytes, or a registered buffer the target RDMA-READs. */
  dataOut?: Buffer | IoBuffer;
  /** Data-in: a registered buffer the target RDMA-WRITEs. */
  dataIn?: IoBuffer;
  /** Bytes of the buffer to use (default: all of it). */
  length?: number;
  /** Called with the command's tag as it is sent (for ABORT TASK after a timeout). */
  onTag?: (tag: bigint) => void;
}

/**
 * Where a native queue command's data is for the target: the remote address
 * and key of its first byte, each as two u32 halves, as the queue's
 * submission words take them (native/initiator-queue.ts). Not a
 * DataDescriptor: it has no length (the command's blocks give it), and the
 * queue encodes the one descriptor itself from these words.
 */
export interface QueueAddressWords {
  addressHi: number;
  addressLo: number;
  keyHi: number;
  keyLo: number;
}

/** A READ or WRITE for the native queue: registered memory, whole blocks; the data is at the address words. */
export interface FastCommand extends QueueAddressWords, QueuedFields {}

/** Who hears of a fast command's end: exactly one of the two is called, once. */
export interface FastWaiter {
  /** The answer: SCSI status, sense (empty unless CHECK CONDITION) and the data-in underflow in bytes. */
  done(status: number, sense: Buffer, underflow: number): void;
  fail(e: Error): void;
}

/** The fields of a READ or WRITE for the native queue, besides where its data is. */
export interface QueuedFields {
  readonly lun: number;
  readonly write: boolean;
  readonly fua: boolean;
  readonly lba: number;
  readonly blocks: number;
  /** Bytes the command moves (blocks × block size). */
  readonly length: number;
}

/** A command for Connection.fastQueue: its fields, and who hears whether it went out and how it ended. */
export interface QueuedCommand extends QueuedFields, BatchedWaiter {}

/** A command queued for the next batch (Connection.fastQueue): told whether it went out, then its end as a FastWaiter. */
export interface BatchedWaiter extends FastWaiter {
  /** Posted, with this tag's low word (a queue tag's high word is 0). */
  posted(tagWord: number): void;
  /** Not posted (the connection closed, no slot or credit after all): the caller sends it another way. */
  unposted(): void;
}

/** Bit 31 of a tag's low word marks the native queue's tags (native/src/core/initiator-queue.h). */
const QUEUE_TAG_BIT = 0x80000000n;
/**
 * The largest train the native queue builds (docs/protocol.md §5.1), when the
 * target's receive buffer is at least this large: 64 READ CMDs, or one 4 KiB
 * WRITE with its data and a few READs. A train is built in one send slot, so
 * each slot is at least this large (native/initiator-queue.ts).
 */
const TRAIN_BYTES = 8192;

const REJECT_NAMES = new Map<number, string>(Object.entries(LoginRejectReason).map(([k, v]) => [v, k]));
const LOGOUT_NAMES = new Map<number, string>(Object.entries(LogoutReason).map(([k, v]) => [v, k]));

interface Pending {
  resolve(c: Capsule): void;
  reject(e: Error): void;
}

const NO_SENSE = Buffer.alloc(0);

/** Words 0 to 9 of the submission entry at word `e` (native/initiator-queue.ts; initiator-queue.cc reads them). */
function putSubmission(s: Uint32Array, e: number, c: QueuedFields, addressHi: number, addressLo: number, keyHi: number, keyLo: number): void {
  const { lun, write, fua, lba, blocks, length } = c;
  s[e] = lun;
  s[e + 1] = Math.floor(lba / 0x100000000);
  s[e + 2] = lba >>> 0;
  s[e + 3] = blocks;
  s[e + 4] = (write ? SUBMIT_WRITE : 0) | (fua ? SUBMIT_FUA : 0);
  s[e + 5] = addressHi;
  s[e + 6] = addressLo;
  s[e + 7] = keyHi;
  s[e + 8] = keyLo;
  s[e + 9] = length;
}

export class Connection {
  /** The credit count; shared with the native queue once one is attached. */
  private creditCell: Int32Array = new Int32Array(1);
  private nextTag = 1n;
  private queue: InitiatorQueue | null = null;
  /** The native queue's commands by slot. */
  private readonly fast: (FastWaiter | undefined)[] = [];
  /** Commands written into the submission words and not yet posted: posted together once this turn's code has run (fastQueue). */
  private readonly batch: BatchedWaiter[] = [];
  private readonly flushBatch = (): void => this.postBatch();
  private readonly pending = new Map<bigint, Pending>();
  /**
   * Version 2: outstanding READ commands by the low 32 bits of their tag, the
   * remote CQ data that answers them (docs/protocol.md §12.1). Kept distinct.
   */
  private readonly reads = new Map<number, bigint>();
  private readonly creditWaiters: (() => void)[] = [];
  private limits: WireLimits = PROTOCOL_LIMITS;
  private rsp!: LoginResponse;
  private closed = false;
  private keepAlive: NodeJS.Timeout | null = null;
  private lastSent = performance.now();
  /** When the target last sent anything (a capsule, or a read's remote CQ data). */
  private lastHeard = performance.now();
  private closeReason = '';
  /** The target's T_LOGOUT reason code (protocol.md §14.3), when it logged this session out. */
  logoutReason: LogoutReason | null = null;
  onClose: ((reason: string) => void) | null = null;

  private constructor(
    readonly conn: InitiatorConnection,
    readonly options: LoginOptions,
  ) {}

  private get credits(): number {
    return this.creditCell[0];
  }
  private set credits(n: number) {
    this.creditCell[0] = n;
  }

  /**
   * A tag for a JS-sent request. With a native queue attached, tags whose low
   * word has bit 31 set are the queue's, so JS skips them (§5, §12.1).
   */
  private takeTag(): bigint {
    let tag = this.nextTag++;
    if (this.queue !== null && (tag & QUEUE_TAG_BIT) !== 0n) {
      this.nextTag += QUEUE_TAG_BIT;
      tag = this.nextTag++;
    }
    return tag;
  }

  /** Connects and logs in; rejects with LoginError on refusal or failure. */
  static async open(transport: InitiatorTransport, o: LoginOptions): Promise<Connection> {
    const queueDepth = o.queueDepth ?? 32;
    const maxIo = o.maxIo ?? 1 << 20;
    const immediate = o.immediateDataSize ?? 8192;
    let conn: InitiatorConnection;
    try {
      conn = await transport.connect({
        address: o.address,
        port: o.port,
        provider: o.provider,
        maxCapsule: Math.max(1024, 48 + immediate),
        queueDepth,
        receiveSize: 1024,
        ioPoolSize: maxIo * queueDepth,
        ioChunkSize: maxIo,
        timeoutMs: o.connectTimeoutMs,
        protocolVersion: o.protocolVersion,
        busyPollMicros: o.busyPollMicros,
      });
    } catch (e) {
      throw new LoginError(`cannot connect to ${o.address}:${o.port}: ${await connectFailureText(e, o.address)}`, 'CONNECT_FAILED');
    }
    const c = new Connection(conn, o);
    conn.onCapsule = (buf) => c.onCapsule(buf);
    conn.onClose = (reason) => c.lost(reason);
    if (conn.version >= REMOTE_DATA_VERSION) conn.onRemoteData = (data) => c.onRemoteData(data);
    try {
      await c.login(queueDepth, Math.min(immediate, conn.accept.maxCapsule - 48));
      if (o.fastPath !== false && conn.attachQueue !== undefined) c.attachQueue(queueDepth);
    } catch (e) {
      await c.close();
      throw e;
    }
    return c;
  }

  get sessionId(): bigint {
    return this.rsp.sessionId;
  }
  get maxTransfer(): number {
    return this.rsp.maxTransfer;
  }
  get immediateDataSize(): number {
    return this.rsp.immediateDataSize;
  }
  /** WRITEs the native queue sent with their data in the CMD, on this connection. */
  get immediateWrites(): number {
    return this.queue?.immediateWrites ?? 0;
  }
  /** Messages of several CMDs the native queue sent on this connection (docs/protocol.md §5.1). */
  get trains(): number {
    return this.queue?.trains ?? 0;
  }
  /** Submits of several messages the native queue sent corked, on this connection (docs/transport.md "Corked bursts"). */
  get corkedSubmits(): number {
    return this.queue?.corked ?? 0;
  }
  /** READ and WRITE on registered memory go through the native queue (LoginOptions.fastPath). */
  get hasFastPath(): boolean {
    return this.queue !== null && !this.closed;
  }
  get grantedCredits(): number {
    return this.rsp.credits;
  }
  get isClosed(): boolean {
    return this.closed;
  }
  get provider(): string {
    return this.conn.provider;
  }
  /** The protocol version this connection speaks (docs/protocol.md §3). */
  get version(): number {
    return this.conn.version;
  }

  private async login(queueDepth: number, immediate: number): Promise<void> {
    const o = this.options;
    const tag = this.nextTag++;
    const req: LoginRequest = {
      op: Opcode.LOGIN_REQ,
      tag,
      authRequired: o.secret !== undefined,
      maxItCapsule: this.conn.accept.maxCapsule,
      maxTiCapsule: 1024,
      immediateDataSize: Math.max(0, immediate),
      credits: queueDepth,
      initiatorName: o.initiatorName,
      targetName: o.targetName,
    };
    const timeout = setTimeout(() => this.failAll(new LoginError('login timed out', 'TIMEOUT')), 10_000);
    try {
      let answer = await this.request(tag, req);
      let nonces: { targetNonce: Buffer; initiatorNonce: Buffer } | null = null;
      if (answer.op === Opcode.LOGIN_CHALLENGE) {
        if (o.secret === undefined) throw new LoginError('the target demands authentication and no secret was given', 'AUTH_FAILED');
        const initiatorNonce = newNonce();
        nonces = { targetNonce: Buffer.from(answer.targetNonce), initiatorNonce };
        const proof = initiatorProof(o.secret, { initiatorName: o.initiatorName, targetName: o.targetName, ...nonces });
        answer = await this.request(tag, { op: Opcode.LOGIN_AUTH, tag, initiatorNonce, initiatorProof: proof });
      }
      if (answer.op === Opcode.LOGIN_REJ) {
        const name = REJECT_NAMES.get(answer.reason) ?? `0x${answer.reason.toString(16)}`;
        if (answer.reason === LoginRejectReason.UNABLE_TO_ASSOCIATE) {
          // The target does not say its own name to an initiator that has not logged in
          // (docs/initiator.md "Errors"): say which name was asked, and where the right one is found.
          throw new LoginError(
            `login rejected by the target: it has no target named '${o.targetName}' (${name}); a target does not tell its name before login: ` +
              `\`rblkd ctl status\` on its host shows it (target_name in rblkd's config; leave target= out for the default, ${DEFAULT_TARGET_NAME})`,
            'LOGIN_REJECTED',
            answer.reason,
          );
        }
        throw new LoginError(`login rejected by the target: ${name}`, answer.reason === LoginRejectReason.AUTH_FAILED ? 'AUTH_FAILED' : 'LOGIN_REJECTED', answer.reason);
      }
      if (answer.op !== Opcode.LOGIN_RSP) throw new LoginError(`unexpected answer to login: op 0x${answer.op.toString(16)}`, 'PROTOCOL_ERROR');
      try {
        checkLoginGrant(req, answer);
      } catch (e) {
        throw new LoginError(`the target's grant is invalid: ${(e as Error).message}`, 'PROTOCOL_ERROR');
      }
      if (o.secret !== undefined) {
        // Mutual authentication: the target must prove it knows the secret too.
        const ok =
          nonces !== null &&
          answer.targetProof !== null &&
          verifyTargetProof(o.secret, { initiatorName: o.initiatorName, targetName: o.targetName, ...nonces }, answer.targetProof);
        if (!ok) throw new LoginError('the target failed to prove it knows the secret', 'AUTH_FAILED');
      }
      this.rsp = answer;
      this.credits = answer.credits;
      this.limits = sessionLimits(answer, 'initiator');
      this.startKeepAlive(answer.keepAliveMs);
    } finally {
      clearTimeout(timeout);
    }
  }

  private startKeepAlive(ms: number): void {
    if (ms <= 0) return;
    // When the outstanding KEEPALIVE was sent, or null.
    let probeSentAt: number | null = null;
    // Checked every half interval: a check every interval could find the last
    // send just short of it, and the next would come after nearly 2 × keepAliveMs
    // of silence, where the target ends the session (§13).
    this.keepAlive = setInterval(() => {
      if (this.closed) return;
      const now = performance.now();
      if (probeSentAt !== null) {
        // §13: no KEEPALIVE_RSP within the interval: the target is dead.
        if (now - probeSentAt >= ms) void this.fail(`no KEEPALIVE_RSP within ${ms} ms`);
        return;
      }
      // Dead-peer detection under load as well as when idle: commands are
      // outstanding and nothing has come back for the interval, so ask now.
      // A host that died without a reset (power, kernel, partition) sends no
      // FIN or RST; without this it would be found only by the command
      // timeout (docs/initiator.md "Multipath").
      const starving = this.pending.size > 0 && now - this.lastHeard >= ms;
      if (now - this.lastSent < ms && !starving) return;
      probeSentAt = now;
      const tag = this.takeTag();
      this.request(tag, { op: Opcode.KEEPALIVE, tag }).then(
        () => (probeSentAt = null),
        () => undefined,
      );
    }, Math.max(25, Math.floor(ms / 2)));
    this.keepAlive.unref();
  }

  private request(tag: bigint, c: Capsule): Promise<Capsule> {
    if (this.closed) return Promise.reject(new TransportError(`connection closed: ${this.closeReason}`));
    return new Promise<Capsule>((resolve, reject) => {
      this.pending.set(tag, { resolve, reject });
      this.lastSent = performance.now();
      this.conn.send(capsuleBuffer(c)).catch((e: Error) => {
        this.pending.delete(tag);
        reject(new TransportError(e.message));
      });
    });
  }

  private onCapsule(buf: Buffer): void {
    this.lastHeard = performance.now();
    let c: Capsule;
    try {
      c = decodeCapsule(buf, { from: 'target', limits: this.limits });
    } catch (e) {
      void this.fail(`undecodable capsule from the target: ${e instanceof ProtocolError ? e.reason + ': ' : ''}${(e as Error).message}`);
      return;
    }
    if (c.op === Opcode.T_LOGOUT) {
      this.logoutReason = c.reason;
      void this.fail(`the target logged this session out: ${LOGOUT_NAMES.get(c.reason) ?? c.reason}`);
      return;
    }
    if (c.op === Opcode.CRED_REQ) {
      this.credits += c.creditDelta;
      void this.conn.send(capsuleBuffer({ op: Opcode.CRED_RSP, tag: c.tag })).catch(() => undefined);
      this.wakeCredits();
      return;
    }
    const p = this.pending.get(c.tag);
    if (!p) {
      void this.fail(`answer with unknown tag ${c.tag}`);
      return;
    }
    this.pending.delete(c.tag);
    if (c.op === Opcode.RSP) this.forgetRead(c.tag);
    if (c.op === Opcode.RSP || c.op === Opcode.TSK_RSP) {
      this.credits += c.creditDelta;
      this.wakeCredits();
    }
    p.resolve(c);
  }

  /**
   * §12.1: a read answered by its data. The data is in place when the CQ
   * reports it; the answer is GOOD, no sense, no residual, credit delta 1.
   */
  private onRemoteData(data: number): void {
    if (this.closed) return;
    this.lastHeard = performance.now();
    const tag = this.reads.get(data);
    const p = tag === undefined ? undefined : this.pending.get(tag);
    if (tag === undefined || p === undefined) {
      void this.fail(`remote CQ data ${data} answers no outstanding read`);
      return;
    }
    this.reads.delete(data);
    this.pending.delete(tag);
    this.credits += 1;
    this.wakeCredits();
    p.resolve({ op: Opcode.RSP, tag, creditDelta: 1, status: 0, sense: NO_SENSE, dataOutResidual: null, dataInResidual: null });
  }

  private forgetRead(tag: bigint): void {
    const low = remoteDataOf(tag);
    if (this.reads.get(low) === tag) this.reads.delete(low);
  }

  private wakeCredits(): void {
    while (this.credits > 0 && this.creditWaiters.length > 0) this.creditWaiters.shift()!();
  }

  /** Waits for a credit; keeps one in reserve for task management (as ib_srp does). */
  private async takeCredit(reserve: number): Promise<void> {
    while (this.credits <= reserve) {
      if (this.closed) throw new TransportError(`connection closed: ${this.closeReason}`);
      await new Promise<void>((r) => this.creditWaiters.push(r));
    }
    this.credits--;
  }

  /** Issues one SCSI command and resolves with its response (SCSI errors are in status/sense, not thrown). */
  async command(r: CommandRequest): Promise<CommandResult> {
    let data: CommandData = { format: DataFormat.NONE };
    let direction: DataDirection = DataDirection.NONE;
    let offered = 0;
    if (r.dataOut !== undefined) {
      direction = DataDirection.WRITE;
      if (Buffer.isBuffer(r.dataOut)) {
        const len = r.length ?? r.dataOut.length;
        if (len > this.rsp.immediateDataSize) throw new RangeError(`immediate data of ${len} bytes exceeds ${this.rsp.immediateDataSize}`);
        data = len === 0 ? { format: DataFormat.NONE } : { format: DataFormat.IMMEDIATE, data: r.dataOut.subarray(0, len) };
        if (len === 0) direction = DataDirection.NONE;
        offered = len;
      } else {
        const segs = r.dataOut.segments(0, r.length ?? r.dataOut.buffer.length);
        data = segs.length === 1 ? { format: DataFormat.DIRECT, descriptor: segs[0] } : { format: DataFormat.LIST, descriptors: segs };
        offered = r.length ?? r.dataOut.buffer.length;
      }
    } else if (r.dataIn !== undefined) {
      direction = DataDirection.READ;
      const segs = r.dataIn.segments(0, r.length ?? r.dataIn.buffer.length);
      data = segs.length === 1 ? { format: DataFormat.DIRECT, descriptor: segs[0] } : { format: DataFormat.LIST, descriptors: segs };
      offered = r.length ?? r.dataIn.buffer.length;
    }
    if (offered > this.rsp.maxTransfer) throw new RangeError(`transfer of ${offered} bytes exceeds the target's maximum of ${this.rsp.maxTransfer}`);
    await this.takeCredit(1);
    let tag = this.takeTag();
    if (direction === DataDirection.READ && this.conn.version >= REMOTE_DATA_VERSION) {
      // The answer may come as the low 32 bits of the tag: those stay unique among outstanding reads.
      while (this.reads.has(remoteDataOf(tag))) tag = this.takeTag();
      this.reads.set(remoteDataOf(tag), tag);
    }
    r.onTag?.(tag);
    const cdb = Buffer.alloc(16);
    r.cdb.copy(cdb);
    let answer: Capsule;
    try {
      answer = await this.request(tag, { op: Opcode.CMD, tag, lun: r.lun, taskAttribute: TaskAttribute.SIMPLE, direction, cdb, data });
    } catch (e) {
      this.forgetRead(tag);
      throw e;
    }
    if (answer.op !== Opcode.RSP) throw new TransportError(`unexpected answer to a command: op 0x${answer.op.toString(16)}`);
    const under = answer.dataInResidual?.kind === 'under' ? answer.dataInResidual.count : 0;
    return { status: answer.status, sense: Buffer.from(answer.sense), dataIn: direction === DataDirection.READ ? offered - under : 0, response: answer };
  }

  private attachQueue(queueDepth: number): void {
    const q = this.conn.attachQueue!({
      slots: queueDepth,
      answerSize: 1024,
      credits: this.credits,
      reserve: 1,
      remoteData: this.conn.version >= REMOTE_DATA_VERSION,
      immediate: this.rsp.immediateDataSize,
      // Version 5: a burst's CMDs go as trains (§5.1), each no larger than the target's receive buffer.
      train: this.conn.version >= TRAIN_VERSION ? Math.min(this.rsp.maxItCapsule, TRAIN_BYTES) : 0,
    });
    this.creditCell = q.credits;
    this.queue = q;
    // Tags from here on skip the queue's (takeTag); none of JS's is outstanding yet.
    if ((this.nextTag & QUEUE_TAG_BIT) !== 0n) this.nextTag += QUEUE_TAG_BIT;
    q.onComplete = (n) => this.onFastComplete(n);
  }

  /**
   * Sends a READ or WRITE through the native queue and returns its tag, or
   * null when the queue cannot take it now (no queue, no credit beyond the
   * reserve, a full transmit queue): then command() sends it. The waiter hears
   * of its end exactly once, as command() would resolve or reject.
   */
  fastCommand(f: FastCommand, w: FastWaiter): bigint | null {
    const q = this.queue;
    if (q === null || this.closed || this.credits <= 1 || f.length > this.rsp.maxTransfer) return null;
    // The batch's entries are in the same submission words: they go first.
    if (this.batch.length > 0) this.postBatch();
    if (this.credits <= 1) return null;
    const s = q.submissions;
    putSubmission(s, 0, f, f.addressHi, f.addressLo, f.keyHi, f.keyLo);
    if (q.submit(1) !== 1) return null;
    // Word 11: the tag's low word, with the slot's generation (initiator-queue.h).
    this.fast[s[10]] = w;
    this.lastSent = performance.now();
    return BigInt(s[11]);
  }

  /**
   * Queues a READ or WRITE for the native queue, to be posted with the others
   * queued in this turn by one submit (docs/initiator.md "The common read and
   * write"), one train on version 5: the completions of one CQ drain wake
   * their callers, whose next commands are then sent together. False when the queue cannot take it
   * (no queue, no credit beyond the reserve counting the batch, a full batch):
   * then the caller sends it another way.
   */
  fastQueue(c: QueuedCommand, addressHi: number, addressLo: number, keyHi: number, keyLo: number): boolean {
    const q = this.queue;
    const n = this.batch.length;
    if (q === null || this.closed || this.credits - n <= 1 || c.length > this.rsp.maxTransfer) return false;
    const s = q.submissions;
    const e = n * SUBMISSION_WORDS;
    if (e + SUBMISSION_WORDS > s.length) return false;
    putSubmission(s, e, c, addressHi, addressLo, keyHi, keyLo);
    this.batch.push(c);
    // Posted once the promise jobs queued now have run, not as one of them: a
    // caller that reads its next request from a stream between commands (the
    // NBD export, each header an await) queues them all into this batch.
    if (n === 0) process.nextTick(this.flushBatch);
    return true;
  }

  /** Posts the batch (fastQueue); what the queue did not take is its callers' to send another way. */
  private postBatch(): void {
    const n = this.batch.length;
    if (n === 0) return;
    const q = this.queue;
    let posted = 0;
    if (q !== null && !this.closed) {
      try {
        posted = q.submit(n);
      } catch {
        // A failing submit posted nothing that JS will hear of: every entry goes another way.
        posted = 0;
      }
    }
    const s = q?.submissions;
    const waiters = this.batch;
    for (let i = 0; i < n; i++) {
      const w = waiters[i];
      if (i < posted) {
        // Words 10 and 11: the slot, and the tag's low word with the slot's generation (initiator-queue.h).
        this.fast[s![i * SUBMISSION_WORDS + 10]] = w;
        w.posted(s![i * SUBMISSION_WORDS + 11]);
      }
    }
    // Cleared before the unposted hear of it: they may queue again.
    const rest = posted < n ? waiters.slice(posted) : null;
    waiters.length = 0;
    if (posted > 0) this.lastSent = performance.now();
    if (rest !== null) for (const w of rest) w.unposted();
  }

  /** One CQ drain's completions of the native queue (native/src/core/initiator-queue.cc). */
  private onFastComplete(n: number): void {
    const q = this.queue;
    if (q === null) return;
    // Answers the native queue took are heard too: the keep-alive's starving
    // check must see them (docs/architecture.md "What the control plane sees of native work").
    this.lastHeard = performance.now();
    const c = q.completions;
    for (let i = 0; i < n; i++) {
      const slot = c[3 * i];
      const result = c[3 * i + 1];
      const length = c[3 * i + 2];
      const w = this.fast[slot];
      this.fast[slot] = undefined;
      if (w === undefined) continue;
      if (result === QueueResult.GOOD) {
        w.done(0, NO_SENSE, 0);
      } else if (result === QueueResult.ANSWER) {
        const at = i * q.answerSize;
        this.fastAnswer(Buffer.from(q.answers.subarray(at, at + length)), w);
      } else {
        w.fail(new TransportError(`sending a command failed (errno ${length})`));
      }
      if (this.closed) return;
    }
    this.wakeCredits();
  }

  /** An answer the native queue did not judge plain GOOD: decoded here, as onCapsule would. */
  private fastAnswer(buf: Buffer, w: FastWaiter): void {
    let c: Capsule;
    try {
      c = decodeCapsule(buf, { from: 'target', limits: this.limits });
    } catch (e) {
      const why = `undecodable capsule from the target: ${e instanceof ProtocolError ? e.reason + ': ' : ''}${(e as Error).message}`;
      w.fail(new TransportError(why));
      void this.fail(why);
      return;
    }
    if (c.op !== Opcode.RSP) {
      w.fail(new TransportError(`unexpected answer to a command: op 0x${c.op.toString(16)}`));
      void this.fail(`answer with op 0x${c.op.toString(16)} to command tag ${c.tag}`);
      return;
    }
    this.credits += c.creditDelta;
    w.done(c.status, Buffer.from(c.sense), c.dataInResidual?.kind === 'under' ? c.dataInResidual.count : 0);
  }

  /** Task management (§14); resolves with the TSK_RSP response code. */
  async taskManagement(lun: number, fn: TaskFunction, taskTag = 0n): Promise<number> {
    await this.takeCredit(0);
    const tag = this.takeTag();
    const answer = await this.request(tag, { op: Opcode.TSK_MGMT, tag, lun, function: fn, taskTag });
    if (answer.op !== Opcode.TSK_RSP) throw new TransportError('unexpected answer to task management');
    return answer.response;
  }

  /** The tag the next command will get (for ABORT TASK in tests and timeouts). */
  peekNextTag(): bigint {
    return this.nextTag;
  }

  allocate(length: number): Promise<IoBuffer> {
    return this.conn.allocate(length);
  }

  /** Registers the session's memory on this connection (InitiatorConnection.register). */
  register(memory: SessionMemory): IoBuffer {
    if (this.closed) throw new TransportError(`connection closed: ${this.closeReason}`);
    return this.conn.register(memory);
  }

  private failAll(e: Error): void {
    for (const p of this.pending.values()) p.reject(e);
    this.pending.clear();
    const fast = this.fast.splice(0);
    for (const w of fast) w?.fail(e);
    this.reads.clear();
    for (const w of this.creditWaiters.splice(0)) w();
  }

  /** Never rejects: it runs from receive handlers and timers that nobody awaits. */
  private async fail(why: string): Promise<void> {
    if (this.closed) return;
    this.closeReason = why;
    try {
      await this.close();
    } catch {
      // close() shut the connection for its users before releasing the
      // transport; a failure to release has nobody left to tell.
    }
  }

  private lost(reason: string): void {
    if (!this.closeReason) this.closeReason = reason;
    this.shut();
  }

  private shut(): void {
    if (this.closed) return;
    this.closed = true;
    if (this.keepAlive) clearInterval(this.keepAlive);
    this.failAll(new TransportError(`connection closed: ${this.closeReason}`));
    this.onClose?.(this.closeReason);
  }

  /**
   * Logs out (I_LOGOUT) and disconnects. Commands still outstanding fail with
   * a TransportError: callers wait for theirs first (protocol.md §14.3).
   */
  async logout(): Promise<void> {
    if (this.closed) return;
    await this.conn.send(capsuleBuffer({ op: Opcode.I_LOGOUT, tag: this.takeTag() })).catch(() => undefined);
    this.closeReason ||= 'logged out';
    await this.close();
  }

  async close(): Promise<void> {
    if (!this.closeReason) this.closeReason = 'closed by the initiator';
    const wasClosed = this.closed;
    this.shut();
    if (!wasClosed) await this.conn.close();
  }
}
