// A MemoryBackend that tests can stop and break: operations of a kind can be
// held at a gate (a backend that hangs), made to fail with an errno (a backend
// that errs), and every call is recorded (to see how I/O was split).
import { backendError } from '../../../target/backend/backend-error.js';
import type { Backend, Extent, WriteOptions } from '../../../target/backend/backend.js';
import { MemoryBackend } from '../../../target/backend/memory.js';

export type Op = 'read' | 'write' | 'flush' | 'discard' | 'writeZeroes';

export interface Call {
  op: Op;
  offset: number;
  length: number;
  fua?: boolean;
}

/** Calls of one kind wait here until release(). */
export class Gate {
  private opened = false;
  private readonly waiters: (() => void)[] = [];
  private arrived!: () => void;
  /** Resolves when the first call has arrived at the gate. */
  readonly reached = new Promise<void>((r) => (this.arrived = r));
  held = 0;

  pass(): Promise<void> {
    if (this.opened) return Promise.resolve();
    this.held++;
    this.arrived();
    return new Promise((r) => this.waiters.push(r));
  }

  release(): void {
    this.opened = true;
    for (const w of this.waiters.splice(0)) w();
  }
}

export class GatedBackend implements Backend {
  readonly inner: MemoryBackend;
  readonly calls: Call[] = [];
  private readonly gates = new Map<Op, Gate>();
  private readonly faults = new Map<Op, string>();

  constructor(size: number, opts: { readOnly?: boolean; name?: string } = {}) {
    this.inner = new MemoryBackend({ size, readOnly: opts.readOnly, name: opts.name });
  }

  get size(): number {
    return this.inner.size;
  }
  get readOnly(): boolean {
    return this.inner.readOnly;
  }
  get canDiscard(): boolean {
    return this.inner.canDiscard;
  }

  /** Holds every call of `op` from now until the gate is released. */
  hold(op: Op): Gate {
    const g = new Gate();
    this.gates.set(op, g);
    return g;
  }

  /** Lets new calls of `op` through again; those already held stay at their gate until it is released. */
  unhold(op: Op): void {
    this.gates.delete(op);
  }

  /** Makes every call of `op` fail with errno `code` until heal(op). */
  fail(op: Op, code: string): void {
    this.faults.set(op, code);
  }

  heal(op: Op): void {
    this.faults.delete(op);
  }

  private async enter(op: Op, offset: number, length: number, fua?: boolean): Promise<void> {
    this.calls.push(fua === undefined ? { op, offset, length } : { op, offset, length, fua });
    await this.gates.get(op)?.pass();
    const code = this.faults.get(op);
    if (code !== undefined) throw backendError(code, `injected ${code} on ${op}`);
  }

  async read(buf: Buffer, offset: number): Promise<void> {
    await this.enter('read', offset, buf.length);
    await this.inner.read(buf, offset);
  }

  async write(buf: Buffer, offset: number, opts?: WriteOptions): Promise<void> {
    await this.enter('write', offset, buf.length, opts?.fua ?? false);
    await this.inner.write(buf, offset, opts);
  }

  async flush(): Promise<void> {
    await this.enter('flush', 0, 0);
    await this.inner.flush();
  }

  async discard(offset: number, length: number): Promise<void> {
    await this.enter('discard', offset, length);
    await this.inner.discard(offset, length);
  }

  async writeZeroes(offset: number, length: number, unmap: boolean): Promise<void> {
    await this.enter('writeZeroes', offset, length);
    await this.inner.writeZeroes(offset, length, unmap);
  }

  extent(offset: number): Promise<Extent> {
    return this.inner.extent(offset);
  }

  refreshSize(): Promise<number> {
    return this.inner.refreshSize();
  }

  close(): Promise<void> {
    for (const g of this.gates.values()) g.release();
    return this.inner.close();
  }
}
