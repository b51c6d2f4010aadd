// An NVMe/TCP host session: one subsystem NQN over one or more paths (a
// controller per address), commands dispatched over the I/O queues
// (controller.ts pick) of the path ANA prefers (Base 2.0 §8.20: Optimized, then
// Non-Optimized; Inaccessible never), and recovery as the rblk library's
// SCSI sessions do it (initiator/session.ts, docs/initiator.md "Reconnecting
// and the loss timeout"): a lost controller reconnects with jittered
// exponential backoff (initiator/backoff.ts) and the commands it had not
// answered are sent again on whichever path is up, so a kick or a daemon
// restart within the loss window is invisible to the caller; after it, they
// fail with RblkError 'CONNECTION_LOST' naming the cause
// (docs/nvme.md "The rblk library as an NVMe/TCP host").
import { createHash } from 'node:crypto';
import { EventEmitter } from 'node:events';
import { hostname } from 'node:os';
import { isSuccess, type NvmeStatus } from '../../protocol/nvme/command.js';
import type { NamespaceInfo } from '../../protocol/nvme/identify.js';
import { reconnectDelay } from '../backoff.js';
import { RblkError } from '../errors.js';
import { RegisteredBuffer } from '../registered-buffer.js';
import { ANA_NON_OPTIMIZED, ANA_OPTIMIZED, NvmeController } from './controller.js';
import { QueueLostError, type Command, type Completion } from './queue.js';
import { errorForNvmeStatus, retryable } from './status.js';
import { parseNvmeUrl, type NvmeUrl } from './url.js';
import { NvmeVolume } from './volume.js';

export interface NvmeConnectOptions {
  /** The host NQN (Base 2.0 §4.5); default: a UUID NQN derived from the machine's hostname. */
  hostnqn?: string;
  /** The 128-bit Host Identifier; default derived like the NQN. */
  hostid?: Buffer;
  /** I/O queues per controller; default min(4, granted). */
  queues?: number;
  /** Entries per I/O queue (capped by CAP.MQES + 1); default 32. */
  queueDepth?: number;
  /** Largest transfer per command, bytes (capped by MDTS); default 1 MiB. */
  maxIo?: number;
  digests?: { header?: boolean; data?: boolean };
  /** Keep Alive Timeout asked for at Connect, ms; default 10 000. */
  kato?: number;
  timeouts?: { commandMs?: number; lossMs?: number; connectMs?: number };
  reconnect?: { initialDelayMs?: number; maxDelayMs?: number };
  /**
   * Connect the I/O queues with SQ flow control disabled (CATTR bit 2,
   * NVMe-oF 1.1 §3.3): a successful read completes by its last C2HData's
   * SUCCESS flag, one PDU fewer. Off unless asked (`?sqflow=off`): a
   * controller that cannot do it may refuse the Connect; rblkd can (its
   * discovery entries' TREQ bit 2).
   */
  disableSqFlowControl?: boolean;
}

export const NVME_DEFAULTS = { queues: 4, queueDepth: 32, maxIo: 1 << 20, kato: 10_000, commandMs: 30_000, lossMs: 30_000, connectMs: 10_000, reconnectInitialMs: 100, reconnectMaxMs: 1000 } as const;

export type NvmePathState = 'connecting' | 'live' | 'down' | 'closed';

export interface NvmePathInfo {
  address: string;
  port: number;
  state: NvmePathState;
  cntlid: number | null;
  ioQueues: number;
  /** ANA state per NSID (1 Optimized, 2 Non-Optimized, 3 Inaccessible ...), when the controller reports ANA. */
  ana: Record<number, number>;
  lastError: string | null;
  /** Reads its I/O queues completed by the last C2HData's SUCCESS flag (SQ flow control disabled). */
  completedBySuccessFlag: number;
}

export interface NvmeSessionEvents {
  /** A path's controller is up again after a loss. */
  reconnect: [path: NvmePathInfo];
  /** A path's controller was lost; recovery follows. */
  pathDown: [path: NvmePathInfo, why: string];
}

class Path {
  controller: NvmeController | null = null;
  state: NvmePathState = 'connecting';
  lastError: string | null = null;
  attempt = 0;
  timer: NodeJS.Timeout | null = null;
  constructor(
    readonly address: string,
    readonly port: number,
  ) {}

  info(): NvmePathInfo {
    const c = this.controller;
    return { address: this.address, port: this.port, state: this.state, cntlid: c?.cntlid ?? null, ioQueues: c?.io.length ?? 0, ana: Object.fromEntries(c?.ana ?? []), lastError: this.lastError, completedBySuccessFlag: c?.io.reduce((n, q) => n + q.bySuccessFlag, 0) ?? 0 };
  }
}

/** A stable host identity for this machine: UUID-based NQN (Base 2.0 §4.5.1) and the same 16 bytes as HOSTID. */
export function defaultHostIdentity(): { hostnqn: string; hostid: Buffer } {
  const h = createHash('sha256').update(`rblk nvme host ${hostname()}`).digest().subarray(0, 16);
  h[6] = (h[6] & 0x0f) | 0x50;
  h[8] = (h[8] & 0x3f) | 0x80;
  const hex = h.toString('hex');
  const uuid = `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
  return { hostnqn: `nqn.2014-08.org.nvmexpress:uuid:${uuid}`, hostid: Buffer.from(h) };
}

/**
 * What a command is, for its errors: a string, or a function that makes one,
 * so that an I/O that succeeds (nearly every one) never formats it.
 */
export type Describe = string | (() => string);

function textOf(d: Describe): string {
  return typeof d === 'string' ? d : d();
}

export class NvmeSession extends EventEmitter<NvmeSessionEvents> {
  readonly subnqn: string;
  readonly hostnqn: string;
  readonly hostid: Buffer;
  /** Controllers brought up again after a loss, over the session's life. */
  reconnects = 0;
  /** Commands sent again after their queue was lost or answered a retryable status. */
  reissued = 0;
  readonly #paths: Path[];
  readonly #o: { -readonly [K in keyof typeof NVME_DEFAULTS]: number } & { digests: { header: boolean; data: boolean } };
  #closed = false;
  readonly #sqfcOff: boolean;
  /** The URL's nsid=, what open() opens without an argument. */
  readonly #defaultNsid: number;
  /** When the last live path went down; null while one is live. */
  #downSince: number | null = null;
  #lastCause = 'not connected yet';
  readonly #changed = new Set<() => void>();
  readonly #volumes = new Set<NvmeVolume>();
  /** Memory handed out by allocate() and not yet released. */
  readonly #buffers = new Set<RegisteredBuffer>();

  private constructor(u: NvmeUrl, o: NvmeConnectOptions) {
    super();
    const id = defaultHostIdentity();
    this.subnqn = u.subnqn;
    this.hostnqn = o.hostnqn ?? u.hostnqn ?? id.hostnqn;
    this.hostid = o.hostid ?? id.hostid;
    if (this.hostid.length !== 16) throw new RangeError('hostid must be 16 bytes');
    const t = o.timeouts ?? {};
    const r = o.reconnect ?? {};
    const num = (name: string, v: number | undefined, d: number, min: number, max: number): number => {
      const n = v ?? d;
      if (!Number.isSafeInteger(n) || n < min || n > max) throw new RangeError(`${name} ${n} is not an integer in ${min}..${max}`);
      return n;
    };
    this.#o = {
      queues: num('queues', o.queues ?? u.queues, NVME_DEFAULTS.queues, 1, 64),
      queueDepth: num('queueDepth', o.queueDepth, NVME_DEFAULTS.queueDepth, 2, 1024),
      maxIo: num('maxIo', o.maxIo, NVME_DEFAULTS.maxIo, 4096, 1 << 30),
      kato: num('kato', o.kato, NVME_DEFAULTS.kato, 0, 3_600_000),
      commandMs: num('timeouts.commandMs', t.commandMs, NVME_DEFAULTS.commandMs, 0, 86_400_000),
      lossMs: num('timeouts.lossMs', t.lossMs, NVME_DEFAULTS.lossMs, 0, 86_400_000),
      connectMs: num('timeouts.connectMs', t.connectMs, NVME_DEFAULTS.connectMs, 1, 86_400_000),
      reconnectInitialMs: num('reconnect.initialDelayMs', r.initialDelayMs, NVME_DEFAULTS.reconnectInitialMs, 1, 86_400_000),
      reconnectMaxMs: num('reconnect.maxDelayMs', r.maxDelayMs, NVME_DEFAULTS.reconnectMaxMs, 1, 86_400_000),
      digests: { header: o.digests?.header ?? u.digests.header, data: o.digests?.data ?? u.digests.data },
    };
    this.#sqfcOff = o.disableSqFlowControl ?? u.disableSqFlowControl ?? false;
    this.#defaultNsid = u.nsid ?? 1;
    this.#paths = u.paths.map((p) => new Path(p.address, p.port));
  }

  /**
   * Connects every path; resolves once at least one controller is up (the
   * others keep trying in the background), rejects with 'LOGIN_FAILED' naming
   * every path's cause when none comes up. The first connect is not retried.
   */
  static async open(url: string | NvmeUrl, o: NvmeConnectOptions = {}): Promise<NvmeSession> {
    const s = new NvmeSession(typeof url === 'string' ? parseNvmeUrl(url) : url, o);
    const results = await Promise.allSettled(s.#paths.map((p) => s.#connectPath(p)));
    if (!s.#paths.some((p) => p.state === 'live')) {
      const why = results.map((r, i) => `${s.#paths[i].address}:${s.#paths[i].port}: ${r.status === 'rejected' ? (r.reason as Error).message : 'no controller'}`).join('; ');
      await s.close();
      throw new RblkError('LOGIN_FAILED', `cannot connect to ${s.subnqn}: ${why}`);
    }
    for (const p of s.#paths) if (p.state === 'down') s.#schedule(p);
    return s;
  }

  get closed(): boolean {
    return this.#closed;
  }

  get paths(): NvmePathInfo[] {
    return this.#paths.map((p) => p.info());
  }

  /** The largest transfer one command carries: maxIo capped by every live controller's MDTS. */
  get maxTransfer(): number {
    let m: number = this.#o.maxIo;
    for (const p of this.#paths) if (p.controller) m = Math.min(m, p.controller.maxTransfer);
    return m;
  }

  /** One attempt to bring a path's controller up. */
  async #connectPath(p: Path): Promise<void> {
    p.state = 'connecting';
    try {
      const c = await NvmeController.open({
        address: p.address,
        port: p.port,
        subnqn: this.subnqn,
        hostnqn: this.hostnqn,
        hostid: this.hostid,
        digests: this.#o.digests,
        ioQueues: this.#o.queues,
        queueSize: this.#o.queueDepth + 1,
        kato: this.#o.kato,
        connectTimeoutMs: this.#o.connectMs,
        commandTimeoutMs: this.#o.commandMs,
        disableSqFlowControl: this.#sqfcOff,
      });
      if (this.#closed) {
        c.close();
        return;
      }
      p.controller = c;
      p.state = 'live';
      p.attempt = 0;
      p.lastError = null;
      this.#downSince = null;
      c.onLost = (why) => this.#onPathLost(p, why);
      this.#wake();
    } catch (e) {
      p.state = 'down';
      p.lastError = e instanceof Error ? e.message : String(e);
      this.#lastCause = p.lastError;
      throw e;
    }
  }

  #onPathLost(p: Path, why: string): void {
    p.controller = null;
    p.state = 'down';
    p.lastError = why;
    this.#lastCause = why;
    if (!this.#paths.some((x) => x.state === 'live')) this.#downSince ??= performance.now();
    this.emit('pathDown', p.info(), why);
    this.#schedule(p);
  }

  /** The next reconnect attempt of a path after its backoff (initiator/backoff.ts). */
  #schedule(p: Path): void {
    if (this.#closed || p.timer) return;
    const delay = reconnectDelay(p.attempt++, this.#o.reconnectInitialMs, this.#o.reconnectMaxMs);
    p.timer = setTimeout(() => {
      p.timer = null;
      if (this.#closed) return;
      this.#connectPath(p).then(
        () => {
          if (p.state === 'live') {
            this.reconnects++;
            this.emit('reconnect', p.info());
          }
        },
        () => this.#schedule(p),
      );
    }, delay);
  }

  #wake(): void {
    for (const f of [...this.#changed]) f();
  }

  /** The live controller ANA prefers for nsid (Optimized, then Non-Optimized, then unknown); null when none. */
  #choose(nsid: number): NvmeController | null {
    let second: NvmeController | null = null;
    for (const p of this.#paths) {
      const c = p.controller;
      if (p.state !== 'live' || c === null || c.io.length === 0) continue;
      const s = c.info.anaReporting ? (c.ana.get(nsid) ?? ANA_OPTIMIZED) : ANA_OPTIMIZED;
      if (s === ANA_OPTIMIZED) return c;
      if (s === ANA_NON_OPTIMIZED && second === null) second = c;
    }
    return second;
  }

  /** Waits for a usable controller, at most until the loss window ends; then CONNECTION_LOST naming the cause. */
  async #controllerFor(nsid: number, what: string, since: number): Promise<NvmeController> {
    for (;;) {
      if (this.#closed) throw new RblkError('CONNECTION_LOST', `${what}: the session is closed`);
      const c = this.#choose(nsid);
      if (c) return c;
      const start = Math.min(since, this.#downSince ?? since);
      const left = start + this.#o.lossMs - performance.now();
      if (left <= 0) {
        throw new RblkError('CONNECTION_LOST', `${what}: no usable path to ${this.subnqn} for ${this.#o.lossMs} ms (timeouts.lossMs); last cause: ${this.#lastCause}`);
      }
      await new Promise<void>((resolve) => {
        const done = (): void => {
          clearTimeout(timer);
          this.#changed.delete(done);
          resolve();
        };
        // Also wake now and then: an ANA state can change without a path coming up.
        const timer = setTimeout(done, Math.min(left, 500));
        this.#changed.add(done);
      });
    }
  }

  /**
   * Runs one command on namespace nsid: sent again when its queue is lost or
   * it is answered with a status a retry can cure (no DNR, Base 2.0
   * §4.6.1.2), within the loss window; anything else becomes a typed error.
   */
  async run(nsid: number, cmd: Command, describe: Describe): Promise<Completion> {
    const since = performance.now();
    let lastStatus: NvmeStatus | null = null;
    /** The last loss, when it was the store not answering a command of the queue: a timeout, not a lost path. */
    let timedOut: QueueLostError | null = null;
    for (let attempt = 0; ; attempt++) {
      if (attempt > 0) this.reissued++;
      // A registered buffer released while its command waited to be reissued: nothing to carry (as the SCSI session does).
      if (cmd.registered?.valid === false) throw new RblkError('BUFFER_RELEASED', `${textOf(describe)}: the registered buffer was released; allocate a new one`);
      let c: NvmeController;
      try {
        // The usual case, a controller ready now, without the wait's extra promise.
        c = (!this.#closed && this.#choose(nsid)) || (await this.#controllerFor(nsid, textOf(describe), since));
      } catch (e) {
        // The window ran out while the controller this command hung was being reset: still the command's TIMEOUT.
        if (timedOut !== null && !this.#closed && e instanceof RblkError && e.code === 'CONNECTION_LOST') {
          throw new RblkError('TIMEOUT', `${textOf(describe)}: not completed within ${this.#o.lossMs} ms (timeouts.lossMs) over ${attempt} attempts; last: ${timedOut.why}`, { cause: e });
        }
        throw e;
      }
      let done: Completion;
      try {
        done = await c.pick().submit(cmd);
      } catch (e) {
        if (!(e instanceof QueueLostError)) throw e;
        if (cmd.idempotent === false) {
          throw new RblkError('CONNECTION_LOST', `${textOf(describe)}: the queue was lost with the command outstanding; it is not reissued because it is not idempotent (${e.why})`, { cause: e });
        }
        timedOut = e.why.includes(' unanswered for ') ? e : null;
        // A controller that keeps coming back but never answers this command (a hung store) must not hold it forever.
        if (performance.now() - since > this.#o.lossMs) {
          throw new RblkError('TIMEOUT', `${textOf(describe)}: not completed within ${this.#o.lossMs} ms (timeouts.lossMs) over ${attempt + 1} attempts; last: ${e.why}`, { cause: e });
        }
        continue;
      }
      if (isSuccess(done.status)) return done;
      lastStatus = done.status;
      if (!retryable(done.status)) throw errorForNvmeStatus(textOf(describe), done.status);
      // An ANA path status: that controller's view changed; read its log again before choosing (Base 2.0 §8.20.3.5).
      if (done.status.sct === 3 && c.info.anaReporting) await c.refreshAna().catch(() => undefined);
      if (performance.now() - since > this.#o.lossMs) throw errorForNvmeStatus(`${textOf(describe)} (retried for ${this.#o.lossMs} ms)`, lastStatus);
      await new Promise((r) => setTimeout(r, reconnectDelay(attempt, this.#o.reconnectInitialMs, this.#o.reconnectMaxMs)));
    }
  }

  /** An admin command on a live controller (Identify, Get Log Page), on the first one up within the loss window. */
  async admin<T>(what: string, f: (c: NvmeController) => Promise<T>, nsid = 0): Promise<T> {
    const since = performance.now();
    for (;;) {
      const c = await this.#controllerFor(nsid, what, since);
      try {
        return await f(c);
      } catch (e) {
        if (!(e instanceof QueueLostError)) throw e;
      }
    }
  }

  /** Active namespaces (Identify CNS 02h) with what Identify Namespace says of each. */
  async namespaces(): Promise<(NamespaceInfo & { nsid: number })[]> {
    return this.admin('list namespaces', async (c) => {
      const out: (NamespaceInfo & { nsid: number })[] = [];
      for (const nsid of await c.activeNamespaces()) out.push({ nsid, ...(await c.namespace(nsid)) });
      return out;
    });
  }

  /**
   * A namespace as a volume. NVMe names no volumes, so a name must be the
   * NSID, as a number or decimal string ("1", "nsid1"); rejects with
   * 'INVALID' for an inactive or unknown NSID. Without one, the URL's
   * `nsid=`, else 1.
   */
  async open(nsidOrName: number | string = this.#defaultNsid): Promise<NvmeVolume> {
    const nsid = typeof nsidOrName === 'number' ? nsidOrName : /^(?:nsid)?(\d+)$/i.exec(nsidOrName) ? Number(/(\d+)$/.exec(nsidOrName)![1]) : NaN;
    if (!Number.isInteger(nsid) || nsid < 1 || nsid > 0xfffffffe) {
      throw new RblkError('INVALID', `"${nsidOrName}": NVMe carries no volume names; open a namespace by its NSID (1..) — rblkd gives LUN n the NSID n + 1 unless the volume sets nsid:`);
    }
    const ns = await this.admin(`Identify Namespace ${nsid}`, (c) => c.namespace(nsid), nsid);
    if (ns.blocks === 0 || ns.blockSize === 0) {
      const active = await this.admin('Identify active namespaces', (c) => c.activeNamespaces()).catch(() => []);
      throw new RblkError('INVALID', `namespace ${nsid} of ${this.subnqn} is not active for ${this.hostnqn} (active: ${active.join(', ') || 'none'})`);
    }
    // Identifiers (CNS 03h) are optional for a controller to list: none is not an error.
    const ids = await this.admin(`Identify Namespace ${nsid} descriptors`, (c) => c.namespaceIds(nsid), nsid).catch(() => ({}));
    const v = new NvmeVolume(this, nsid, ns, ids);
    this.#volumes.add(v);
    return v;
  }

  /**
   * Memory for the Volume API's registered-buffer I/O, as the SCSI session's
   * allocate() gives (initiator/registered-buffer.ts), so the same code runs
   * over both. NVMe/TCP has no RDMA: "zero copy" here means a read's
   * C2HData is copied from the socket's chunks straight into this memory
   * and a write's bytes go from it to the socket (in the capsule or as
   * H2CData), with no intermediate buffer in JavaScript. There is no
   * registration to make or undo: release() (or close()) makes every I/O
   * through it, or through any view of it, fail BUFFER_RELEASED, and the
   * memory is freed by the garbage collector once nothing uses it, so a
   * command still in flight never writes into or sends freed memory
   * (docs/nvme.md "Registered buffers").
   */
  allocate(size: number): RegisteredBuffer {
    if (!Number.isSafeInteger(size) || size <= 0) throw new RangeError(`allocate(${size}): the size must be a positive integer`);
    if (this.#closed) throw new RblkError('CONNECTION_LOST', 'allocate: the session is closed');
    // Its own ArrayBuffer, never a slice of Node's pool: RegisteredBuffer.find knows a view by its ArrayBuffer.
    const b = new RegisteredBuffer({ buffer: Buffer.from(new ArrayBuffer(size)), free: () => undefined }, size, (gone) => this.#buffers.delete(gone));
    this.#buffers.add(b);
    return b;
  }

  /** @internal NvmeVolume.close. */
  forget(v: NvmeVolume): void {
    this.#volumes.delete(v);
  }

  /** Shuts every controller down (CC.SHN), closes every queue and timer; commands still waiting reject with 'CONNECTION_LOST'. */
  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    for (const p of this.#paths) {
      if (p.timer) clearTimeout(p.timer);
      p.timer = null;
    }
    this.#wake();
    await Promise.all(this.#paths.map((p) => p.controller?.shutdown()));
    for (const p of this.#paths) {
      p.controller = null;
      p.state = 'closed';
    }
    for (const v of [...this.#volumes]) v.close();
    for (const b of [...this.#buffers]) b.release();
  }

  async [Symbol.asyncDispose](): Promise<void> {
    await this.close();
  }
}
