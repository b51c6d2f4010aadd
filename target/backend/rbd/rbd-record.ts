// A SharedRecord (target/backend/backend.ts) of an rbd volume: one RADOS object
// next to the image, `rblk_<purpose>.<image id>` in the image's pool and
// namespace, through the addon's record calls (native/src/rbd/rbd-record.cc). Its
// data is the version on a first line, then the caller's bytes; the same
// version sits in the object's `rblk.version` xattr, which a write compares
// (rados_write_op_cmpxattr) in the same atomic write op that replaces both.
// docs/backends.md "rbd" says why an object of its own and not image metadata.
import type { RbdImage } from '../../../native/rbd.js';
import type { SharedRecord, SharedRecordEvents } from '../backend.js';
import type { IoGate } from '../io-gate.js';

/** Records are small; this bounds a read of one that someone else made huge. */
const MAX_RECORD = 16 * 1024 * 1024;
const WATCH_TIMEOUT_FLOOR_S = 30;

export class RbdRecord implements SharedRecord {
  readonly where: string;
  readonly timeoutMs: number;
  #image: RbdImage;
  #events: SharedRecordEvents | null = null;
  readonly #gate: IoGate;
  readonly #oid: string;
  readonly #timeoutSeconds: number;

  constructor(image: RbdImage, gate: IoGate, oid: string, where: string, timeoutSeconds: number) {
    this.#image = image;
    this.#gate = gate;
    this.#oid = oid;
    this.where = where;
    this.#timeoutSeconds = timeoutSeconds;
    this.timeoutMs = timeoutSeconds * 1000;
  }

  read(): Promise<{ version: string; data: Buffer } | null> {
    return this.#gate.run(async () => {
      for (let size = 64 * 1024; ; size *= 4) {
        const buf = Buffer.alloc(size);
        const n = await this.#image.recordRead(this.#oid, buf);
        if (n === null) return null;
        // A full buffer may mean more: read again with a bigger one.
        if (n === size && size < MAX_RECORD) continue;
        const nl = buf.indexOf(0x0a);
        if (nl < 0 || nl >= n) throw Object.assign(new Error(`${this.where} holds no version line`), { code: 'EINVAL' });
        return { version: buf.toString('latin1', 0, nl), data: buf.subarray(nl + 1, n) };
      }
    });
  }

  write(expected: string | null, version: string, data: Buffer): Promise<boolean> {
    return this.#gate.run(() => this.#image.recordWrite(this.#oid, expected, version, Buffer.concat([Buffer.from(`${version}\n`, 'latin1'), data])));
  }

  publish(): Promise<boolean> {
    return this.#gate.run(() => this.#image.recordNotify(this.#oid, this.#timeoutSeconds * 1000));
  }

  watch(events: SharedRecordEvents): Promise<void> {
    return this.#gate.run(async () => {
      this.#events = events;
      this.#listen(this.#image);
      await this.#image.recordWatch(this.#oid, this.#watchTimeout());
    });
  }

  rewatch(): Promise<void> {
    return this.#gate.run(async () => {
      const image = this.#image;
      await image.recordUnwatch();
      await image.recordWatch(this.#oid, this.#watchTimeout());
    });
  }

  /**
   * The backend made its librados client anew (RbdBackend.recover, after a
   * blocklist): the record is read and watched through the new one. The old
   * watch is dead with its client; the events listener hears that it broke,
   * and the reservation store watches and reads again through the new image.
   */
  moveTo(image: RbdImage): void {
    this.#image = image;
    if (this.#events === null) return;
    this.#listen(image);
    this.#events.broken(new Error(`${this.where}: watched again through the gateway's new Ceph client`));
  }

  #listen(image: RbdImage): void {
    const events = this.#events;
    if (events === null) return;
    image.onRecord((e) => {
      // Only the current image's events count: an old client's late ones are of no use.
      if (image !== this.#image) return;
      if (e.kind === 'notify') events.changed(() => this.#ack(image, e.seq));
      else events.broken(e.error);
    });
  }

  /**
   * How long the OSD keeps the watch of a gateway that stopped pinging it.
   * librados pings its watches once per objecter tick (objecter_tick_interval,
   * 5 s), so a shorter timeout would break a healthy watch on every tick; Ceph's
   * own default (osd_client_watch_timeout) is 30 s. A dead gateway's watch
   * lingers that long, but a notify waits for it only timeout_s (publish()).
   */
  #watchTimeout(): number {
    return Math.max(WATCH_TIMEOUT_FLOOR_S, this.#timeoutSeconds);
  }

  #ack(image: RbdImage, seq: number): void {
    if (this.#gate.closed || image !== this.#image) return;
    image.recordAck(seq);
  }
}
