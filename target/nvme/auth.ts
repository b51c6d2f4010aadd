// The controller side of DH-HMAC-CHAP (NVMe Base 2.0 §8.13; NVMe-oF TP 8006)
// for one queue (docs/nvme.md "Authentication"). A queue whose Connect set
// AUTHREQ.ATR runs only Authentication Send/Receive until a transaction ends
// in success; connection.ts asks `authenticated` for everything else.
//
// One transaction: the host sends AUTH_Negotiate (Send), reads the
// DH-HMAC-CHAP_Challenge (Receive), sends the _Reply (Send), reads _Success1
// or AUTH_Failure1 (Receive), and, when it asked to authenticate the
// controller, sends _Success2 or AUTH_Failure2 (Send). A bad or unexpected
// message does not fail the command: like Linux's nvmet, the next Receive
// returns AUTH_Failure1 with the explanation, and a new Negotiate may start
// again. Keys, challenges and responses are never logged.
import { randomBytes, randomInt, timingSafeEqual } from 'node:crypto';
import {
  AUTH_SECP,
  AUTH_SPSP0,
  AUTH_SPSP1,
  AuthId,
  AuthMessageError,
  AuthType,
  decodeNegotiate,
  decodeReply,
  DH_GROUPS,
  DhExchange,
  dhchapResponse,
  augmentChallenge,
  encodeChallenge,
  encodeFailure,
  encodeSuccess1,
  FailureExplanation,
  HASHES,
  readAuthHeader,
  transformKey,
  type DhchapKey,
} from '../../protocol/nvme/auth.js';
import { Status, type NvmeStatus } from '../../protocol/nvme/command.js';
import type { TargetLogger } from '../connection/environment.js';
import type { Completion } from './io.js';

/** The largest TL/AL taken: a Reply in ffdhe8192 with SHA-512 is 16 + 2 × 64 + 1024 bytes. */
export const MAX_AUTH_TRANSFER = 8192;

type Step = 'negotiate' | 'challenge' | 'reply' | 'success1' | 'success2' | 'failure1';

export class DhchapController {
  authenticated = false;
  #step: Step = 'negotiate';
  #tid = 0;
  #hashId = 0;
  #dhGroup = 0;
  #dh: DhExchange | null = null;
  #shared: Buffer | null = null;
  #c1: Buffer | null = null;
  #s1 = 0;
  #c2: Buffer | null = null;
  #s2 = 0;
  #explanation: number = FailureExplanation.Failed;

  constructor(
    private readonly o: {
      /** The host's key (auth.initiators' secret); also the controller's for bidirectional authentication (docs/nvme.md). */
      key: DhchapKey & { unknownHost?: boolean };
      hostnqn: string;
      subnqn: string;
      log: TargetLogger;
    },
  ) {}

  /** The SECP/SPSP0/SPSP1 and TL/AL checks shared by Send and Receive; the length, or the status to fail with. */
  static checkCommand(sqe: Buffer): number | NvmeStatus {
    if (sqe[43] !== AUTH_SECP || sqe[41] !== AUTH_SPSP0 || sqe[42] !== AUTH_SPSP1) return Status.InvalidField;
    const len = sqe.readUInt32LE(44);
    if (len === 0 || len > MAX_AUTH_TRANSFER) return Status.InvalidField;
    return len;
  }

  /** Authentication Send with its TL bytes: always Success; what went wrong is the next Receive's Failure1. */
  send(data: Buffer): Completion {
    try {
      this.#receiveMessage(data);
    } catch (e) {
      if (!(e instanceof AuthMessageError)) throw e;
      this.#fail(e.explanation, e.message);
    }
    return { status: Status.Success };
  }

  /** Authentication Receive for AL bytes: the next message, zero-padded to AL. */
  receive(al: number): Completion {
    let m: Buffer;
    switch (this.#step) {
      case 'challenge':
        m = this.#challenge();
        this.#step = 'reply';
        break;
      case 'success1': {
        const hash = HASHES.get(this.#hashId)!;
        const r2 = this.#c2 ? this.#response('controller', this.#c2, this.#s2) : null;
        m = encodeSuccess1({ tid: this.#tid, hashLength: hash.length, response: r2 });
        if (r2) this.#step = 'success2';
        else this.#succeed();
        break;
      }
      case 'failure1':
        m = encodeFailure(AuthId.Failure1, this.#tid, this.#explanation);
        this.#reset();
        break;
      default:
        this.#fail(FailureExplanation.IncorrectMessage, `Authentication Receive while expecting ${this.#step === 'negotiate' ? 'AUTH_Negotiate' : 'a Send'}`);
        m = encodeFailure(AuthId.Failure1, this.#tid, this.#explanation);
        this.#reset();
    }
    if (m.length > al) {
      this.#reset();
      return { status: Status.InvalidField };
    }
    const out = Buffer.alloc(al);
    m.copy(out);
    return { status: Status.Success, data: out };
  }

  #receiveMessage(b: Buffer): void {
    const h = readAuthHeader(b);
    if (h.type === AuthType.Common && h.id === AuthId.Negotiate) return this.#negotiate(b);
    if (h.type === AuthType.Common && h.id === AuthId.Failure2 && this.#step === 'success2' && h.tid === this.#tid) {
      // The host did not accept R2 (§8.13 AUTH_Failure2): the transaction ends unauthenticated.
      this.o.log.warn('NVMe in-band authentication: the host rejected the controller response (AUTH_Failure2)', { explanation: b.length > 7 ? b[7] : undefined });
      this.#reset();
      return;
    }
    const expected = this.#step === 'reply' ? AuthId.Reply : this.#step === 'success2' ? AuthId.Success2 : -1;
    if (h.type !== AuthType.Dhchap || h.id !== expected) {
      throw new AuthMessageError(FailureExplanation.IncorrectMessage, `unexpected authentication message type ${h.type} id ${h.id} (step ${this.#step})`);
    }
    if (h.tid !== this.#tid) throw new AuthMessageError(FailureExplanation.IncorrectPayload, `T_ID ${h.tid}, the transaction's is ${this.#tid}`);
    if (h.id === AuthId.Reply) return this.#reply(b);
    // Success2: the host accepted R2; the queue is authenticated.
    this.#succeed();
  }

  #negotiate(b: Buffer): void {
    this.#reset();
    const n = decodeNegotiate(b);
    this.#tid = n.tid;
    // Secure channel concatenation (TLS keyed by this exchange) is not implemented.
    if (n.scc !== 0) throw new AuthMessageError(FailureExplanation.ConcatMismatch, `secure channel concatenation ${n.scc} requested`);
    const hash = n.hashes.find((id) => HASHES.has(id));
    if (hash === undefined) throw new AuthMessageError(FailureExplanation.HashNotUsable, `no usable hash among [${n.hashes.join(', ')}]`);
    const dh = n.dhGroups.find((id) => DH_GROUPS.has(id));
    if (dh === undefined) throw new AuthMessageError(FailureExplanation.DhGroupNotUsable, `no usable DH group among [${n.dhGroups.join(', ')}]`);
    this.#hashId = hash;
    this.#dhGroup = dh;
    this.#step = 'challenge';
  }

  #challenge(): Buffer {
    const hash = HASHES.get(this.#hashId)!;
    const bits = DH_GROUPS.get(this.#dhGroup)!;
    this.#c1 = randomBytes(hash.length);
    this.#s1 = randomInt(1, 2 ** 32 - 1);
    this.#dh = bits === 0 ? null : new DhExchange(bits);
    return encodeChallenge({ tid: this.#tid, hashId: this.#hashId, dhGroup: this.#dhGroup, seqnum: this.#s1, challenge: this.#c1, dhValue: this.#dh?.publicValue ?? Buffer.alloc(0) });
  }

  #reply(b: Buffer): void {
    const hash = HASHES.get(this.#hashId)!;
    if (b[6] !== hash.length) throw new AuthMessageError(FailureExplanation.IncorrectPayload, `Reply HL ${b[6]}, the hash's is ${hash.length}`);
    const r = decodeReply(b);
    if (this.#dh) this.#shared = this.#dh.secret(r.dhValue);
    else if (r.dhValue.length !== 0) throw new AuthMessageError(FailureExplanation.IncorrectPayload, 'a DH value with the NULL DH group');
    const expected = this.#response('host', this.#c1!, this.#s1);
    if (!timingSafeEqual(expected, r.response)) {
      const why = this.o.key.unknownHost === true ? 'the host has no secret in auth.initiators (auth.required)' : 'the host response does not match its configured secret';
      this.o.log.warn(`NVMe in-band authentication failed: ${why}`, { host: this.o.hostnqn });
      throw new AuthMessageError(FailureExplanation.Failed, 'host response mismatch');
    }
    if (r.challenge) {
      // A C2 equal to C1 would have the controller answer its own challenge (a reflection).
      if (r.challenge.equals(this.#c1!)) throw new AuthMessageError(FailureExplanation.Failed, 'C2 equals C1');
      this.#c2 = r.challenge;
      this.#s2 = r.seqnum;
    }
    this.#step = 'success1';
  }

  #response(role: 'host' | 'controller', challenge: Buffer, seqnum: number): Buffer {
    const hash = HASHES.get(this.#hashId)!.name;
    // Kh' is transformed with the host's NQN, Kc' with the subsystem's (§8.13, secret representation).
    const key = transformKey(this.o.key, role === 'host' ? this.o.hostnqn : this.o.subnqn);
    const c = this.#shared ? augmentChallenge(hash, this.#shared, challenge) : challenge;
    return dhchapResponse({ hash, key, challenge: c, seqnum, tid: this.#tid, scc: 0, role, hostnqn: this.o.hostnqn, subnqn: this.o.subnqn });
  }

  #succeed(): void {
    const bidirectional = this.#c2 !== null;
    const group = this.#dhGroup;
    const hash = HASHES.get(this.#hashId)!.name;
    this.#reset();
    this.authenticated = true;
    this.o.log.info(`NVMe in-band authentication succeeded (DH-HMAC-CHAP, ${hash}, ${group === 0 ? 'NULL DH' : `ffdhe${DH_GROUPS.get(group)}`}${bidirectional ? ', bidirectional' : ''})`);
  }

  #fail(explanation: number, why: string): void {
    this.o.log.debug(`NVMe in-band authentication: ${why}; Failure1 explanation ${explanation}`);
    this.#explanation = explanation;
    this.#step = 'failure1';
    this.authenticated = false;
  }

  #reset(): void {
    this.#step = 'negotiate';
    this.#dh = null;
    this.#shared = null;
    this.#c1 = null;
    this.#c2 = null;
    this.#s1 = 0;
    this.#s2 = 0;
  }
}
