// What an initiator learns from the login answers before it has authenticated
// (docs/protocol.md §10): nothing about which names the target knows. A name
// with a secret and volumes, a name with a secret and no volume, and a name
// the target has never heard of all get LOGIN_CHALLENGE, then LOGIN_REJ
// "authentication failed" for a wrong proof. The target's log keeps the real
// reason. Checked capsule by capsule on a bare connection.
import test from 'ava';
import {
  capsuleBuffer,
  decodeCapsule,
  initiatorProof,
  LoginRejectReason,
  newNonce,
  Opcode,
  type Capsule,
} from '../../protocol/wire/index.js';
import type { InitiatorConnection } from '../../initiator/transport/transport.js';
import { startTarget, TARGET_NAME, type Fixture } from '../helpers/target-fixture.js';

const KNOWN = 'iqn.2026-11.io.rblk:known';
const NO_VOLUME = 'iqn.2026-11.io.rblk:known-without-volumes';
const UNKNOWN = 'iqn.2026-11.io.rblk:never-configured';
const SECRETS = { [KNOWN]: 'the secret of the known one', [NO_VOLUME]: 'the secret of the one without volumes' };
const WRONG = 'a guess that is long enough to be a secret';

async function raw(f: Fixture): Promise<{ conn: InitiatorConnection; next(): Promise<Capsule> }> {
  const conn = await f.initiatorTransport.connect({
    address: f.address,
    port: f.port,
    provider: f.kind === 'loop' ? undefined : f.kind,
    maxCapsule: 1024,
    queueDepth: 4,
    receiveSize: 1024,
    ioPoolSize: 1 << 20,
    ioChunkSize: 1 << 20,
  });
  const got: Capsule[] = [];
  let closed = false;
  conn.onCapsule = (b) => got.push(decodeCapsule(b, { from: 'target' }));
  conn.onClose = () => (closed = true);
  let read = 0;
  return {
    conn,
    async next() {
      for (let i = 0; i < 2000 && got.length <= read; i++) {
        if (closed && got.length <= read) break;
        await new Promise((r) => setTimeout(r, 5));
      }
      if (got.length <= read) throw new Error(closed ? 'the target disconnected without an answer' : 'no answer from the target');
      return got[read++];
    },
  };
}

/** The answers one login attempt gets, as "OP" or "OP reason", proving with `secret`. */
async function answers(f: Fixture, initiatorName: string, secret: string, authRequired = false): Promise<string[]> {
  const c = await raw(f);
  try {
    const tag = 7n;
    await c.conn.send(
      capsuleBuffer({ op: Opcode.LOGIN_REQ, tag, authRequired, maxItCapsule: 1024, maxTiCapsule: 1024, immediateDataSize: 0, credits: 4, initiatorName, targetName: TARGET_NAME }),
    );
    const out: string[] = [];
    let a = await c.next();
    if (a.op === Opcode.LOGIN_CHALLENGE) {
      out.push('LOGIN_CHALLENGE');
      const initiatorNonce = newNonce();
      const proof = initiatorProof(secret, { initiatorName, targetName: TARGET_NAME, targetNonce: Buffer.from(a.targetNonce), initiatorNonce });
      await c.conn.send(capsuleBuffer({ op: Opcode.LOGIN_AUTH, tag, initiatorNonce, initiatorProof: proof }));
      a = await c.next();
    }
    out.push(a.op === Opcode.LOGIN_REJ ? `LOGIN_REJ 0x${a.reason.toString(16)}` : a.op === Opcode.LOGIN_RSP ? 'LOGIN_RSP' : `op 0x${a.op.toString(16)}`);
    return out;
  } finally {
    await c.conn.close();
  }
}

const AUTH_FAILED = `LOGIN_REJ 0x${LoginRejectReason.AUTH_FAILED.toString(16)}`;
const ACCESS_DENIED = `LOGIN_REJ 0x${LoginRejectReason.ACCESS_DENIED.toString(16)}`;

for (const kind of ['loop', 'tcp'] as const) {
  for (const authRequired of [true, false]) {
    test.serial(`${kind}, auth.required ${authRequired}: before authentication a known name, a known name without volumes and an unknown name get the same answers`, async (t) => {
      const f = await startTarget(kind, [{ name: 'vol0', lun: 0, size: 1 << 20, acl: { [KNOWN]: 'rw' } }], { secrets: SECRETS, authRequired });
      t.teardown(() => f.close());
      // A prober has no secret: it guesses one. With auth.required off it sets AUTH_REQUIRED, as rblk's initiator does with a secret.
      const probe = (name: string) => answers(f, name, WRONG, !authRequired);
      const known = await probe(KNOWN);
      t.deepEqual(known, ['LOGIN_CHALLENGE', AUTH_FAILED]);
      t.deepEqual(await probe(NO_VOLUME), known, 'known name without volumes');
      t.deepEqual(await probe(UNKNOWN), known, 'unknown name');
      // The target's log says what really happened.
      const warns = f.log.filter((l) => l.level === 'warn').map((l) => `${l.message} ${String(l.meta?.initiator)}`);
      t.true(warns.some((w) => /wrong secret/.test(w) && w.endsWith(KNOWN)), warns.join('\n'));
      t.true(warns.some((w) => /wrong secret/.test(w) && w.endsWith(NO_VOLUME)), warns.join('\n'));
      t.true(warns.some((w) => /no secret is configured for this initiator/.test(w) && w.endsWith(UNKNOWN)), warns.join('\n'));
      // After authenticating, the initiator may learn that it sees no volume; and the known one logs in.
      t.deepEqual(await answers(f, NO_VOLUME, SECRETS[NO_VOLUME]), ['LOGIN_CHALLENGE', ACCESS_DENIED]);
      t.true(f.log.some((l) => l.level === 'warn' && /no volume is visible/.test(l.message) && l.meta?.initiator === NO_VOLUME));
      t.deepEqual(await answers(f, KNOWN, SECRETS[KNOWN]), ['LOGIN_CHALLENGE', 'LOGIN_RSP']);
    });
  }
}
