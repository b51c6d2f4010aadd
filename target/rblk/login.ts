// rblk's login (docs/protocol.md §7, §10): LOGIN_REQ → [LOGIN_CHALLENGE →
// LOGIN_AUTH] → LOGIN_RSP or LOGIN_REJ. What the target answers each step
// with, and the LOGIN_RSP it grants; the connection (connection.ts) sends the
// answers and changes its state.
import { randomBytes } from 'node:crypto';
import {
  LoginRejectReason,
  MAX_TRANSFER_LENGTH,
  newNonce,
  Opcode,
  targetProof,
  verifyInitiatorProof,
  type LoginRequest,
  type LoginResponse,
} from '../../protocol/wire/index.js';
import type { ConnectionEnvironment, SessionLimits, TargetLogger } from '../connection/environment.js';
import type { DataBuffer, TargetConnection } from '../transport/transport.js';

/** Stands in for the secret of a name that has none (§10): random, known to nobody. */
const UNKNOWN_NAME_SECRET = randomBytes(32);

/** Largest target-to-initiator capsule rblk sends: RSP with 252 bytes of sense is 284. */
const TARGET_CAPSULE_NEED = 512;

/** The answer to one login step: refuse, challenge (with the target's nonce), or grant (with the target's proof when it authenticated). */
export type LoginStep = { readonly reject: LoginRejectReason } | { readonly challenge: Buffer } | { readonly grant: Buffer | null };

/** What a login step reads: the connection's environment, its transport connection and its log. */
export interface LoginContext {
  readonly env: ConnectionEnvironment;
  readonly conn: TargetConnection<DataBuffer>;
  readonly log: TargetLogger;
}

/** The fields of a login's log lines: no session id yet. */
export function loginFields(req: LoginRequest, conn: TargetConnection<DataBuffer>): Record<string, unknown> {
  return { initiator: req.initiatorName, connection: conn.id, peer: conn.peer };
}

/** LOGIN_REQ: refused, challenged, or (no authentication) granted. */
export function loginRequestStep(req: LoginRequest, { env, conn, log }: LoginContext): LoginStep {
  const m = loginFields(req, conn);
  log.debug(
    `LOGIN_REQ: target ${JSON.stringify(req.targetName)}, ${req.credits} credits, capsules ${req.maxItCapsule}/${req.maxTiCapsule}, immediate data ${req.immediateDataSize}${req.authRequired ? ', initiator requires authentication' : ''}`,
    m,
  );
  if (req.targetName !== env.targetName) {
    log.warn(`login refused: unknown target name ${JSON.stringify(req.targetName)}`, m);
    return { reject: LoginRejectReason.UNABLE_TO_ASSOCIATE };
  }
  if (req.maxItCapsule > conn.maxCapsule) return { reject: LoginRejectReason.CAPSULE_TOO_LARGE };
  if (req.maxTiCapsule < TARGET_CAPSULE_NEED) return { reject: LoginRejectReason.CAPSULE_TOO_LARGE };
  const admitted = env.admitSession();
  if (admitted !== 'ok') {
    log.warn(`login refused: ${admitted === 'full' ? 'max_sessions reached' : 'shutting down'}`, m);
    return { reject: admitted === 'full' ? LoginRejectReason.NO_RESOURCES : LoginRejectReason.SHUTTING_DOWN };
  }
  // §10: whether a name is known, has a secret, or sees a volume is told to
  // nobody before it authenticates. Every login that needs authentication
  // is challenged, known name or not, and every wrong answer is the same
  // AUTH_FAILED after the same HMAC work, as CHAP targets do.
  if (env.secretFor(req.initiatorName) !== null || env.authRequired || req.authRequired) return { challenge: newNonce() };
  // No authentication: the name is all the target has, and the ACL decides.
  return seesSomeVolume(req, env, log, m) ?? { grant: null };
}

/** LOGIN_AUTH: the initiator's proof of its secret, checked against the transcript of this login. */
export function loginAuthStep(req: LoginRequest, targetNonce: Buffer, initiatorNonce: Buffer, proof: Buffer, { env, conn, log }: LoginContext): LoginStep {
  const secret = env.secretFor(req.initiatorName);
  const transcript = {
    initiatorName: req.initiatorName,
    targetName: env.targetName,
    targetNonce,
    initiatorNonce: Buffer.from(initiatorNonce),
  };
  // A name with no secret is checked against a random one, so that its
  // refusal costs what a wrong secret's does.
  const matches = verifyInitiatorProof(secret ?? UNKNOWN_NAME_SECRET, transcript, proof);
  const m = loginFields(req, conn);
  if (secret === null) {
    log.warn('login refused: authentication required and no secret is configured for this initiator (answered as authentication failed)', m);
    return { reject: LoginRejectReason.AUTH_FAILED };
  }
  if (!matches) {
    log.warn('login refused: authentication failed (wrong secret or tampered exchange)', m);
    return { reject: LoginRejectReason.AUTH_FAILED };
  }
  log.debug('LOGIN_AUTH: the initiator proved its secret', m);
  return seesSomeVolume(req, env, log, m) ?? { grant: targetProof(secret, transcript) };
}

/** ACCESS DENIED for an initiator that can see no volume; told only to a name that authenticated, or when none must. */
function seesSomeVolume(req: LoginRequest, env: ConnectionEnvironment, log: TargetLogger, m: Record<string, unknown>): LoginStep | null {
  if (env.lunsFor(req.initiatorName).size > 0) return null;
  log.warn('login refused: no volume is visible to this initiator', m);
  return { reject: LoginRejectReason.ACCESS_DENIED };
}

/** The LOGIN_RSP granting `req`: its limits, the target's and the transport's, whichever is lowest. */
export function loginResponse(req: LoginRequest, sessionId: bigint, conn: TargetConnection<DataBuffer>, l: SessionLimits, proof: Buffer | null): LoginResponse {
  const maxItCapsule = Math.min(req.maxItCapsule, conn.maxCapsule);
  return {
    op: Opcode.LOGIN_RSP,
    tag: req.tag,
    sessionId,
    maxItCapsule,
    maxTiCapsule: Math.min(req.maxTiCapsule, 4096),
    immediateDataSize: Math.min(req.immediateDataSize, l.inCapsuleData, maxItCapsule - 48),
    maxTransfer: Math.min(l.maxIo, MAX_TRANSFER_LENGTH),
    credits: Math.max(1, Math.min(req.credits, l.queueDepth, conn.recvBuffers - 3)),
    maxDescriptors: l.maxDescriptors,
    keepAliveMs: l.keepAliveMs,
    targetProof: proof,
  };
}
