// The initiator's native queue against a target that answers a command twice
// (docs/initiator.md "Fast path", docs/protocol.md §5): the queue reuses its
// slots, so a second, late RSP for a slot's earlier command arrives while the
// slot holds a new one. That answer must not complete the new command: a
// write acknowledged before it reached the target is a write that can be
// lost. The queue's tags carry a per-slot generation for this; a stale
// answer goes to JavaScript, which treats an answer to no outstanding tag as
// the protocol error it is (the connection is dropped and its commands are
// reissued on the next one). Real tcp endpoints, the target's own session
// code; only the transport under it is wrapped to send the duplicate.
import test from 'ava';
import { connect } from '../../initiator/index.js';
import { Opcode } from '../../protocol/wire/index.js';
import { FabricTargetTransport } from '../../target/transport/fabric-transport.js';
import type { PortHandlers, PortOptions, TargetConnection, TargetPort, TargetTransport } from '../../target/transport/transport.js';
import { GatedBackend } from './helpers/gated-backend.js';
import { pattern, startServer } from './helpers/target.js';
import { checkSuiteResources, warmUpFabric } from '../helpers/resources.js';

checkSuiteResources(test, { warmUp: () => warmUpFabric(['tcp']) });

/**
 * Remembers, per slot of the initiator's queue (the low 16 bits of a tag whose
 * low word has bit 31 set), the last RSP the session sent, and once armed
 * sends it again just before handing the session the next queue CMD in that
 * slot: the duplicate then reaches the initiator while that CMD is
 * outstanding in the same slot.
 */
class AnswersTwice implements TargetTransport {
  readonly name = 'fabric' as const;
  readonly #inner = new FabricTargetTransport();
  armed = false;
  duplicated = 0;
  readonly answered = new Map<number, Buffer>();
  closes: string[] = [];

  listen(opts: PortOptions, handlers: PortHandlers): Promise<TargetPort> {
    return this.#inner.listen(opts, { ...handlers, connected: (conn) => handlers.connected(this.#wrap(conn)) });
  }

  #wrap<B extends Parameters<TargetConnection['write']>[0]>(conn: TargetConnection<B>): TargetConnection<B> {
    let onCapsule: TargetConnection['onCapsule'] = null;
    conn.onCapsule = (capsule) => {
      // §5: the opcode is the header's first byte, the tag bytes 8 to 15.
      const low = capsule.length >= 16 ? capsule.readUInt32BE(12) : 0;
      const earlier = this.answered.get(low & 0xffff);
      if (this.armed && capsule[0] === Opcode.CMD && (low & 0x80000000) !== 0 && earlier !== undefined) {
        this.armed = false;
        this.duplicated++;
        void conn.send(earlier).catch(() => undefined);
      }
      onCapsule?.(capsule);
    };
    return new Proxy(conn, {
      get: (target, prop, receiver) => {
        if (prop === 'send') {
          return (capsule: Buffer): Promise<void> => {
            const low = capsule.readUInt32BE(12);
            if (capsule[0] === Opcode.RSP && (low & 0x80000000) !== 0) this.answered.set(low & 0xffff, Buffer.from(capsule));
            return target.send(capsule);
          };
        }
        if (prop === 'onCapsule') return onCapsule;
        const v: unknown = Reflect.get(target, prop, receiver);
        return typeof v === 'function' ? (v as (...a: unknown[]) => unknown).bind(target) : v;
      },
      set: (target, prop, value) => {
        if (prop === 'onCapsule') {
          onCapsule = value as TargetConnection['onCapsule'];
          return true;
        }
        if (prop === 'onClose') {
          const f = value as TargetConnection['onClose'];
          target.onClose = (reason) => {
            this.closes.push(reason);
            f?.(reason);
          };
          return true;
        }
        return Reflect.set(target, prop, value);
      },
    }) satisfies TargetConnection<B> as TargetConnection<B>;
  }
}

test('a second RSP for a slot\'s earlier command does not acknowledge the write now in that slot', async (t) => {
  const backend = new GatedBackend(4 << 20, { name: 'vol' });
  const wire = new AnswersTwice();
  const target = await startServer('tcp', [{ name: 'vol', lun: 0, backend }], { transport: wire });
  t.teardown(() => target.close());
  // Two credits: the queue has two slots and, keeping one credit for task
  // management, one command out at a time.
  const s = await connect(target.options({ queueDepth: 2, connections: 1, reconnect: { initialDelayMs: 10, maxDelayMs: 50 } }));
  t.teardown(() => s.close());
  const v = await s.open('vol');

  // A write through the native queue (16 KiB: more than the target takes as
  // immediate data, so it goes by RDMA READ), answered once; its RSP is remembered.
  const first = pattern(16384, 1);
  await v.write(0, first);
  t.is(wire.answered.size, 1, 'the write went through the native queue');

  // The next write is held at the backend; the target replays the first RSP as it arrives.
  const second = pattern(16384, 2);
  const gate = backend.hold('write');
  wire.armed = true;
  let settled = false;
  const write = v.write(16384, second).finally(() => (settled = true));
  await gate.reached;
  // Either the stale answer completed the write (the defect), or it ended the connection.
  while (!settled && wire.closes.length === 0) await new Promise((r) => setTimeout(r, 10));
  t.is(wire.duplicated, 1, 'the target answered the first write twice');
  gate.release();
  if (settled) {
    // The defect: later answers are shifted onto later commands, so stop here.
    t.fail('the write was acknowledged while the backend still held it');
    return;
  }
  // Reissued on the next connection, as a command never answered is.
  await write;
  t.true((await v.read(16384, 16384)).equals(second), 'the write landed, and reads back');
  t.true((await v.read(0, 16384)).equals(first));
});
