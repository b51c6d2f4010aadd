// A peer that sends one capsule and disconnects at once, over and over, in a
// process of its own (abrupt-disconnect.test.ts): the sockets provider's
// initiator side wears out under hundreds of domains opened and closed in one
// process, and the test's own healthy session must not depend on that.
// Usage: abrupt-peer.ts PROVIDER PORT login|keepalive TRIES
// Prints one JSON line: { done, errors: { message: count } }.
import { FabricInitiatorTransport } from '../../../initiator/transport/fabric-transport.js';
import type { InitiatorConnection } from '../../../initiator/transport/transport.js';
import { capsuleBuffer, decodeCapsule, DEFAULT_TARGET_NAME, Opcode, type Capsule } from '../../../protocol/wire/index.js';

const [provider, portText, mode, triesText] = process.argv.slice(2);
const port = Number(portText);
const tries = Number(triesText);

function loginRequest(tag: bigint): Buffer {
  return capsuleBuffer({
    op: Opcode.LOGIN_REQ,
    tag,
    authRequired: false,
    maxItCapsule: 1024,
    maxTiCapsule: 1024,
    immediateDataSize: 0,
    credits: 4,
    initiatorName: 'iqn.2026-11.io.rblk:abrupt',
    targetName: DEFAULT_TARGET_NAME,
  });
}

/** The first capsule the target sends on conn; rejects if the connection closes first. */
function nextCapsule(conn: InitiatorConnection): Promise<Capsule> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error('no capsule from the target in 10 s')), 10_000);
    conn.onClose = (why) => {
      clearTimeout(timer);
      reject(new Error(`the connection closed before the target answered: ${why}`));
    };
    conn.onCapsule = (b) => {
      clearTimeout(timer);
      conn.onCapsule = null;
      try {
        resolve(decodeCapsule(b, { from: 'target' }));
      } catch (e) {
        reject(e instanceof Error ? e : new Error(String(e)));
      }
    };
  });
}

async function once(conn: InitiatorConnection, i: number): Promise<void> {
  if (mode === 'login') {
    // The send completes locally (inject); the target answers a peer that is gone.
    await conn.send(loginRequest(BigInt(i + 1)));
    return;
  }
  const [rsp] = await Promise.all([nextCapsule(conn), conn.send(loginRequest(1n))]);
  if (rsp.op !== Opcode.LOGIN_RSP) throw new Error(`login answered with opcode 0x${rsp.op.toString(16)}`);
  await conn.send(capsuleBuffer({ op: Opcode.KEEPALIVE, tag: 2n }));
}

async function main(): Promise<void> {
  let done = 0;
  const errors: Record<string, number> = {};
  for (let i = 0; i < tries; i++) {
    try {
      const conn = await new FabricInitiatorTransport().connect({
        address: '127.0.0.1',
        port,
        provider,
        maxCapsule: 1024,
        queueDepth: 4,
        receiveSize: 1024,
        ioPoolSize: 64 * 1024,
        ioChunkSize: 64 * 1024,
      });
      try {
        await once(conn, i);
      } finally {
        await conn.close();
      }
      done++;
    } catch (e) {
      const key = e instanceof Error ? e.message : String(e);
      errors[key] = (errors[key] ?? 0) + 1;
    }
  }
  process.stdout.write(JSON.stringify({ done, errors }) + '\n');
}

main().then(
  () => process.exit(0),
  (e: unknown) => {
    process.stderr.write(`abrupt-peer: ${e instanceof Error ? (e.stack ?? e.message) : String(e)}\n`);
    process.exit(1);
  },
);
