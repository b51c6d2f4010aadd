// A ledger of acknowledged writes. Every write puts unique bytes in one block (its block
// number and a serial number in the first 16 bytes, then a pattern seeded by the serial),
// so a block that reads back can only match the write that put it there. Each writer owns
// its own blocks and has one write outstanding at a time, so for every block the ledger
// knows the last acknowledged write, and the writes since then whose fate is unknown
// (sent, then failed or cut off): after the run a block must hold the acknowledged bytes
// or one of those; anything else is an acknowledged write lost.

/** What the ledger writes through and reads back through: the library, NBD, ... */
export interface BlockClient {
  write(offset: number, data: Buffer, fua: boolean): Promise<void>;
  read(offset: number, length: number): Promise<Buffer>;
}

export const LEDGER_BLOCK = 4096;

export function blockContent(block: number, serial: number): Buffer {
  const b = Buffer.allocUnsafe(LEDGER_BLOCK);
  b.writeUInt32BE(0x52424c4b, 0);
  b.writeUInt32BE(block, 4);
  b.writeDoubleBE(serial, 8);
  let x = (serial * 2654435761 + block) >>> 0 || 1;
  for (let i = 16; i < LEDGER_BLOCK; i += 4) {
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    b.writeUInt32LE(x >>> 0, i);
  }
  return b;
}

interface BlockState {
  acked: number | null;
  /** Writes sent after the acknowledged one whose outcome is unknown. */
  unknown: number[];
}

export interface LedgerStats {
  /** Writes sent. */
  writes: number;
  acked: number;
  /** Writes that failed (error from the client). */
  failed: number;
  /** The first few distinct error messages. */
  errors: string[];
}

export class Ledger {
  readonly blocks = new Map<number, BlockState>();
  readonly stats: LedgerStats = { writes: 0, acked: 0, failed: 0, errors: [] };
  #serial = 1;
  #stop = false;
  #running: Promise<void>[] = [];
  /** Called after every acknowledgement (resume-time measurement). */
  onAck: (() => void) | null = null;

  /**
   * @param blocksPerWriter blocks owned by each writer: writer w owns [w × n, (w + 1) × n)
   * @param base byte offset of block 0 on the device
   */
  constructor(
    readonly writers: number,
    readonly blocksPerWriter: number,
    readonly base = 0,
  ) {}

  get totalBlocks(): number {
    return this.writers * this.blocksPerWriter;
  }

  #state(block: number): BlockState {
    let s = this.blocks.get(block);
    if (s === undefined) {
      s = { acked: null, unknown: [] };
      this.blocks.set(block, s);
    }
    return s;
  }

  #error(e: unknown): void {
    this.stats.failed++;
    const msg = e instanceof Error ? `${(e as { code?: string }).code ?? e.name}: ${e.message}` : String(e);
    const short = msg.length > 200 ? `${msg.slice(0, 200)}...` : msg;
    if (this.stats.errors.length < 5 && !this.stats.errors.includes(short)) this.stats.errors.push(short);
  }

  /** Starts the writers; they run until stop(). A failed write is recorded and the writer goes on after pauseMs. */
  start(client: () => BlockClient, fua: boolean, pauseMs = 50): void {
    this.#stop = false;
    for (let w = 0; w < this.writers; w++) {
      this.#running.push(
        (async () => {
          let n = 0;
          while (!this.#stop) {
            const block = w * this.blocksPerWriter + ((n++ * 7919) % this.blocksPerWriter);
            const serial = this.#serial++;
            const s = this.#state(block);
            s.unknown.push(serial);
            this.stats.writes++;
            try {
              await client().write(this.base + block * LEDGER_BLOCK, blockContent(block, serial), fua);
              s.acked = serial;
              s.unknown = [];
              this.stats.acked++;
              this.onAck?.();
            } catch (e) {
              this.#error(e);
              await new Promise((r) => setTimeout(r, pauseMs));
            }
          }
        })(),
      );
    }
  }

  /** Stops the writers after their current write. */
  async stop(): Promise<void> {
    this.#stop = true;
    await Promise.all(this.#running);
    this.#running = [];
  }

  /** Reads every written block back; counts acknowledged writes whose bytes are not there. */
  async verify(client: BlockClient): Promise<{ checked: number; lost: number; examples: string[] }> {
    let checked = 0;
    let lost = 0;
    const examples: string[] = [];
    for (const [block, s] of this.blocks) {
      if (s.acked === null) continue;
      checked++;
      const got = await client.read(this.base + block * LEDGER_BLOCK, LEDGER_BLOCK);
      const candidates = [s.acked, ...s.unknown];
      if (candidates.some((serial) => got.equals(blockContent(block, serial)))) continue;
      lost++;
      if (examples.length < 3) {
        const found = got.readUInt32BE(0) === 0x52424c4b ? `write #${got.readDoubleBE(8)} of block ${got.readUInt32BE(4)}` : 'other bytes';
        examples.push(`block ${block}: acknowledged write #${s.acked}, holds ${found}`);
      }
    }
    return { checked, lost, examples };
  }
}
