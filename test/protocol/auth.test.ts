import { createHmac } from 'node:crypto';
import test from 'ava';
import {
  capsuleBuffer,
  decodeCapsule,
  initiatorProof,
  newNonce,
  Opcode,
  targetProof,
  verifyInitiatorProof,
  verifyTargetProof,
  type AuthTranscript,
} from '../../protocol/wire/index.js';

const secret = 'correct horse battery staple';
const initiatorName = 'iqn.2025-01.org.example:host1';
const targetName = 'iqn.2025-01.org.example:vol0';
const fixedNonce = (fill: number): Buffer => Buffer.alloc(32, fill);

test('happy path: challenge, answer and target proof through encoded capsules', (t) => {
  // Target: LOGIN_REQ arrives, it challenges with a fresh nonce.
  const targetNonce = newNonce();
  const challengeWire = capsuleBuffer({ op: Opcode.LOGIN_CHALLENGE, tag: 1n, targetNonce });

  // Initiator: answers with its own nonce and proof.
  const challenge = decodeCapsule(challengeWire, { from: 'target' });
  if (challenge.op !== Opcode.LOGIN_CHALLENGE) return t.fail('expected LOGIN_CHALLENGE');
  const initiatorNonce = newNonce();
  const iTranscript: AuthTranscript = { initiatorName, targetName, targetNonce: challenge.targetNonce, initiatorNonce };
  const authWire = capsuleBuffer({
    op: Opcode.LOGIN_AUTH,
    tag: 1n,
    initiatorNonce,
    initiatorProof: initiatorProof(secret, iTranscript),
  });

  // Target: verifies, then proves itself in LOGIN_RSP.
  const auth = decodeCapsule(authWire, { from: 'initiator' });
  if (auth.op !== Opcode.LOGIN_AUTH) return t.fail('expected LOGIN_AUTH');
  const tTranscript: AuthTranscript = { initiatorName, targetName, targetNonce, initiatorNonce: auth.initiatorNonce };
  t.true(verifyInitiatorProof(secret, tTranscript, auth.initiatorProof));
  const proofOfTarget = targetProof(Buffer.from(secret), tTranscript);

  // Initiator: verifies the target.
  t.true(verifyTargetProof(secret, iTranscript, proofOfTarget));
  t.false(proofOfTarget.equals(auth.initiatorProof));
});

test('the MAC is HMAC-SHA256 over the documented transcript', (t) => {
  const transcript = { initiatorName: 'i1', targetName: 't22', targetNonce: fixedNonce(0x11), initiatorNonce: fixedNonce(0x22) };
  const message = Buffer.concat([
    Buffer.from('rblk-auth-v1'),
    Buffer.from([0x49, 2]),
    Buffer.from('i1'),
    Buffer.from([3]),
    Buffer.from('t22'),
    fixedNonce(0x11),
    fixedNonce(0x22),
  ]);
  const expected = createHmac('sha256', secret).update(message).digest();
  t.deepEqual(initiatorProof(secret, transcript), expected);
  message[12] = 0x54;
  t.deepEqual(targetProof(secret, transcript), createHmac('sha256', secret).update(message).digest());
});

const base: AuthTranscript = { initiatorName, targetName, targetNonce: fixedNonce(1), initiatorNonce: fixedNonce(2) };

test('a wrong secret fails on both sides', (t) => {
  t.false(verifyInitiatorProof(secret, base, initiatorProof('not the right secret!', base)));
  t.false(verifyTargetProof(secret, base, targetProof('not the right secret!', base)));
  t.true(verifyInitiatorProof(secret, base, initiatorProof(secret, base)));
});

test('a proof replayed into a later login, or over a tampered challenge, fails', (t) => {
  const recorded = initiatorProof(secret, base);
  // Next login: the target picks a new nonce; the recorded answer no longer fits.
  t.false(verifyInitiatorProof(secret, { ...base, targetNonce: fixedNonce(3) }, recorded));
  // A challenge altered in flight: the initiator answers what it saw, the target checks what it sent.
  const tampered = Buffer.from(base.targetNonce);
  tampered[0] ^= 1;
  t.false(verifyInitiatorProof(secret, base, initiatorProof(secret, { ...base, targetNonce: tampered })));
  // A target proof recorded earlier does not fit the initiator's fresh nonce.
  t.false(verifyTargetProof(secret, { ...base, initiatorNonce: fixedNonce(4) }, targetProof(secret, base)));
  // Nor does a tampered proof.
  const flipped = Buffer.from(recorded);
  flipped[31] ^= 0x80;
  t.false(verifyInitiatorProof(secret, base, flipped));
});

test('proofs are bound to both names and to the role', (t) => {
  const proof = initiatorProof(secret, base);
  t.false(verifyInitiatorProof(secret, { ...base, targetName: 'iqn.2025-01.org.example:vol1' }, proof));
  t.false(verifyInitiatorProof(secret, { ...base, initiatorName: 'iqn.2025-01.org.example:host2' }, proof));
  // Length prefixes keep ("ab", "c") and ("a", "bc") apart.
  const ab = initiatorProof(secret, { ...base, initiatorName: 'ab', targetName: 'c' });
  t.false(verifyInitiatorProof(secret, { ...base, initiatorName: 'a', targetName: 'bc' }, ab));
  // Reflection: the target's own proof sent back as the initiator's does not verify.
  t.false(verifyInitiatorProof(secret, base, targetProof(secret, base)));
  t.false(verifyTargetProof(secret, base, proof));
});

test('an initiator that echoes the target nonce fails even with a correct MAC', (t) => {
  const echoed = { ...base, initiatorNonce: base.targetNonce };
  t.false(verifyInitiatorProof(secret, echoed, initiatorProof(secret, echoed)));
});

test('malformed wire input fails verification instead of throwing; bad local secrets throw', (t) => {
  t.false(verifyInitiatorProof(secret, base, Buffer.alloc(31)));
  t.false(verifyInitiatorProof(secret, { ...base, targetNonce: Buffer.alloc(16) }, initiatorProof(secret, base)));
  t.false(verifyInitiatorProof(secret, { ...base, initiatorName: 'bad name' }, initiatorProof(secret, base)));
  t.throws(() => verifyInitiatorProof('short', base, Buffer.alloc(32)), {
    instanceOf: RangeError,
    message: 'authentication secret must be at least 16 bytes',
  });
  t.throws(() => initiatorProof(secret, { ...base, initiatorNonce: Buffer.alloc(8) }), { instanceOf: RangeError });
});

test('nonces are 32 random bytes', (t) => {
  const a = newNonce();
  const b = newNonce();
  t.is(a.length, 32);
  t.false(a.equals(b));
});
