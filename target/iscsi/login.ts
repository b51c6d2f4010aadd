// The iSCSI login phase (RFC 7143 §6, §11.12-11.13): the stages, continued
// login text, the security stage (AuthMethod, CHAP, mutual CHAP) and the
// operational keys (negotiation.ts). IscsiLogin decides what each Login
// Request is answered with; the connection (connection.ts) sends the answers,
// refuses with the status a LoginRefusal carries, and enters the full feature
// phase when the login is complete.
import { randomBytes } from 'node:crypto';
import type { ConnectionEnvironment, TargetLogger } from '../connection/environment.js';
import { CHAP_MD5, chapResponse, decodeBinary, encodeBinary, newChallenge, verifyResponse, type ChapChallenge } from './chap.js';
import type { SessionRegistry } from './connection.js';
import { negotiate, type SessionParams, type TargetOffer } from './negotiation.js';
import { LoginStatus } from './pdu.js';
import { parseText } from './text.js';

/** Login text is small; more than this across continued PDUs is refused (RFC 7143 §6.6 lets the target bound it). */
const MAX_LOGIN_TEXT = 64 * 1024;
/** Stands in for the secret of a name that has none: random, known to nobody. */
const UNKNOWN_SECRET = randomBytes(16);

export type Stage = 0 | 1 | 3;

/** A login refused with this status (class 2: the initiator's error; class 3: the target's). */
export class LoginRefusal extends Error {
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message);
  }
}

/** What a Login Request is answered with: a Login Response (transit to `nsg`, or not), or the last one, which completes the login. */
export type LoginOutcome =
  | { readonly finish: false; readonly transit: boolean; readonly csg: number; readonly nsg: number; readonly answer: [string, string][] }
  | { readonly finish: true; readonly answer: [string, string][] };

/** What the login reads and sets of its connection. */
export interface LoginHost {
  readonly env: ConnectionEnvironment;
  readonly registry: SessionRegistry;
  readonly offer: TargetOffer;
  readonly params: SessionParams;
  /** The connection's log as it is now. */
  readonly log: TargetLogger;
  meta(): Record<string, unknown>;
  readonly isid: string;
  readonly tsih: number;
  /** The first Login PDU: the session's ISID, TSIH and CID, and where its sequence numbers start. */
  started(h: Buffer): void;
  /** '' until the initiator has named itself. */
  readonly initiatorName: string;
  /** The initiator named itself (InitiatorName): every log line carries the name from now on. */
  named(name: string): void;
  /** SessionType=Discovery. */
  discovery: boolean;
}

export class IscsiLogin {
  /** The current stage: security (0), operational (1), full feature (3). */
  stage: Stage = 0;
  private loginText: Buffer[] = [];
  private loginTextBytes = 0;
  private loginStarted = false;
  /** The security stage is behind: CHAP accepted, or none needed. */
  authenticated = false;
  private authNone = false;
  private chap: ChapChallenge | null = null;
  private chapStep: 'none' | 'method' | 'challenged' | 'done' = 'none';
  /** The operational stage's keys have been answered. */
  operationalAnswered = false;
  private answeredTpgt = false;

  constructor(private readonly c: LoginHost) {}

  /** Whether the initiator authenticated with CHAP (for the login's log line). */
  get usedChap(): boolean {
    return !(this.authNone || !this.chap);
  }

  /** One Login Request (RFC 7143 §11.12): what to answer, or that the login is complete. */
  step(h: Buffer, data: Buffer): LoginOutcome {
    const transit = (h[1] & 0x80) !== 0;
    const cont = (h[1] & 0x40) !== 0;
    const csg = ((h[1] >> 2) & 3) as Stage | 2;
    const nsg = (h[1] & 3) as Stage | 2;
    if (h[3] > 0) throw new LoginRefusal(LoginStatus.UNSUPPORTED_VERSION, `version-min ${h[3]}; rblkd speaks version 0`);
    if (transit && cont) throw new LoginRefusal(LoginStatus.INITIATOR_ERROR, 'T and C both set');
    if (csg === 2 || (transit && (nsg === 2 || nsg <= csg))) throw new LoginRefusal(LoginStatus.INITIATOR_ERROR, `bad stage transition ${csg} -> ${nsg}`);
    const isid = h.toString('hex', 8, 14);
    if (!this.loginStarted) {
      this.loginStarted = true;
      this.c.started(h);
    } else if (isid !== this.c.isid) throw new LoginRefusal(LoginStatus.INITIATOR_ERROR, 'ISID changed during login');
    if (csg !== this.stage && !(this.stage === 0 && csg === 1 && this.chapStep === 'none')) {
      throw new LoginRefusal(LoginStatus.INVALID_DURING_LOGIN, `login PDU for stage ${csg} while in stage ${this.stage}`);
    }
    this.stage = csg;
    this.loginTextBytes += data.length;
    if (this.loginTextBytes > MAX_LOGIN_TEXT) throw new LoginRefusal(LoginStatus.OUT_OF_RESOURCES, 'login text too long');
    this.loginText.push(Buffer.from(data));
    if (cont) {
      // RFC 7143 §6.6: an empty response asks for the rest of the text.
      return { finish: false, transit: false, csg: this.stage, nsg: 0, answer: [] };
    }
    const pairs = parseText(Buffer.concat(this.loginText));
    this.loginText = [];
    this.loginTextBytes = 0;
    const keys = new Map(pairs);
    this.c.log.debug(`iSCSI login stage ${csg}${transit ? ` -> ${nsg}` : ''}: ${pairs.map(([k, v]) => (k.startsWith('CHAP_R') || k === 'CHAP_C' ? k : `${k}=${v}`)).join(' ')}`, this.c.meta());
    if (this.c.initiatorName === '') this.firstLogin(keys);

    const answer: [string, string][] = [];
    if (!this.answeredTpgt) {
      // RFC 7143 §13.9: the first Login Response of a new session names the portal group.
      if (!this.c.discovery) answer.push(['TargetPortalGroupTag', '1']);
      this.answeredTpgt = true;
    }
    let mayTransit = true;
    if (csg === 0) mayTransit = this.security(keys, answer);
    else {
      if (!this.authenticated) {
        // Skipping the security stage is only a login without authentication.
        if (this.needsAuth()) throw new LoginRefusal(LoginStatus.AUTH_FAILURE, 'authentication required, and the initiator skipped the security stage');
        this.authenticated = true;
      }
    }
    // Operational keys may come in either stage (the security stage's are login and CHAP keys, which negotiate() skips).
    const ops = negotiate(pairs, this.c.params, this.c.offer, csg === 1 && !this.operationalAnswered);
    if (csg === 1) this.operationalAnswered = true;
    answer.push(...ops.filter(([k]) => !answer.some(([a]) => a === k)));
    if (!transit || !mayTransit) return { finish: false, transit: false, csg: this.stage, nsg: 0, answer };
    if (nsg === 3) return { finish: true, answer };
    this.stage = nsg as Stage;
    return { finish: false, transit: true, csg, nsg, answer };
  }

  /** Whether this initiator must authenticate: auth.required, or a secret configured for its name. */
  needsAuth(): boolean {
    return this.c.env.authRequired || this.c.env.secretFor(this.c.initiatorName) !== null;
  }

  /** The first PDU's keys: who logs in, to which session type and target, and whether it may (max_sessions, draining, reinstatement). */
  private firstLogin(keys: Map<string, string>): void {
    const name = keys.get('InitiatorName');
    if (name === undefined || name === '') throw new LoginRefusal(LoginStatus.MISSING_PARAMETER, 'no InitiatorName');
    if (name.length > 223) throw new LoginRefusal(LoginStatus.INITIATOR_ERROR, 'InitiatorName longer than 223 bytes');
    this.c.named(name);
    const type = keys.get('SessionType') ?? 'Normal';
    if (type !== 'Normal' && type !== 'Discovery') throw new LoginRefusal(LoginStatus.SESSION_TYPE_NOT_SUPPORTED, `SessionType=${type}`);
    this.c.discovery = type === 'Discovery';
    if (!this.c.discovery) {
      const target = keys.get('TargetName');
      if (target === undefined) throw new LoginRefusal(LoginStatus.MISSING_PARAMETER, 'no TargetName in a Normal session');
      if (target !== this.c.env.targetName) throw new LoginRefusal(LoginStatus.NOT_FOUND, `unknown target name ${JSON.stringify(target)}`);
      const admitted = this.c.env.admitSession();
      if (admitted === 'full') throw new LoginRefusal(LoginStatus.OUT_OF_RESOURCES, 'max_sessions reached');
      if (admitted === 'draining') throw new LoginRefusal(LoginStatus.SERVICE_UNAVAILABLE, 'shutting down');
    } else if (this.c.env.admitSession() === 'draining') throw new LoginRefusal(LoginStatus.SERVICE_UNAVAILABLE, 'shutting down');
    if (this.c.tsih !== 0) {
      const old = this.c.registry.find(name, this.c.isid);
      if (!old || old.tsih !== this.c.tsih) throw new LoginRefusal(LoginStatus.SESSION_DOES_NOT_EXIST, `no session with TSIH ${this.c.tsih}`);
    }
  }

  /** The security stage: AuthMethod, then CHAP (RFC 7143 §12.1.3). Returns whether the stage may end now. */
  private security(keys: Map<string, string>, answer: [string, string][]): boolean {
    const method = keys.get('AuthMethod');
    if (this.chapStep === 'none') {
      if (method === undefined) {
        if (this.needsAuth()) throw new LoginRefusal(LoginStatus.AUTH_FAILURE, 'authentication required, and no AuthMethod offered');
        this.authenticated = true;
        return true;
      }
      const offered = method.split(',');
      const wantChap = this.needsAuth() || !offered.includes('None');
      if (wantChap && !offered.includes('CHAP')) throw new LoginRefusal(LoginStatus.AUTH_FAILURE, `authentication required, and AuthMethod=${method} has no CHAP`);
      if (!wantChap) {
        answer.push(['AuthMethod', 'None']);
        this.authNone = true;
        this.authenticated = true;
        this.chapStep = 'done';
        return true;
      }
      answer.push(['AuthMethod', 'CHAP']);
      this.chapStep = 'method';
      // The initiator may send CHAP_A in the same PDU.
      if (!keys.has('CHAP_A')) return false;
    }
    if (this.chapStep === 'method') {
      const algorithms = keys.get('CHAP_A');
      if (algorithms === undefined) throw new LoginRefusal(LoginStatus.AUTH_FAILURE, 'no CHAP_A after AuthMethod=CHAP');
      if (!algorithms.split(',').includes(CHAP_MD5)) {
        answer.push(['CHAP_A', 'Reject']);
        throw new LoginRefusal(LoginStatus.AUTH_FAILURE, `CHAP_A=${algorithms} has no MD5 (5)`);
      }
      this.chap = newChallenge();
      answer.push(['CHAP_A', CHAP_MD5], ['CHAP_I', String(this.chap.id)], ['CHAP_C', encodeBinary(this.chap.challenge)]);
      this.chapStep = 'challenged';
      return false;
    }
    if (this.chapStep === 'challenged') {
      const n = keys.get('CHAP_N');
      const r = keys.get('CHAP_R');
      if (n === undefined || r === undefined) throw new LoginRefusal(LoginStatus.AUTH_FAILURE, 'no CHAP_N and CHAP_R after the challenge');
      const secret = this.c.env.secretFor(this.c.initiatorName);
      // A name without a secret is checked against a random one, so its refusal looks like a wrong secret's (docs/protocol.md §10).
      const ok = verifyResponse(this.chap!, secret ?? UNKNOWN_SECRET, decodeBinary(r, 'CHAP_R'));
      if (secret === null || !ok) throw new LoginRefusal(LoginStatus.AUTH_FAILURE, secret === null ? 'no secret is configured for this initiator' : `CHAP response of ${n} is wrong`);
      const mi = keys.get('CHAP_I');
      const mc = keys.get('CHAP_C');
      if (mi !== undefined || mc !== undefined) {
        // Mutual CHAP: the initiator authenticates the target.
        if (mi === undefined || mc === undefined) throw new LoginRefusal(LoginStatus.AUTH_FAILURE, 'mutual CHAP needs both CHAP_I and CHAP_C');
        const id = Number(mi);
        if (!/^[0-9]+$/.test(mi) || id > 255) throw new LoginRefusal(LoginStatus.AUTH_FAILURE, `CHAP_I=${mi}`);
        const challenge = decodeBinary(mc, 'CHAP_C');
        // RFC 7143 §12.1.3: a target's own challenge sent back is a reflection attack.
        if (challenge.equals(this.chap!.challenge)) throw new LoginRefusal(LoginStatus.AUTH_FAILURE, 'the initiator reflected the target challenge');
        answer.push(['CHAP_N', this.c.env.targetName], ['CHAP_R', encodeBinary(chapResponse(id, secret, challenge))]);
      }
      this.chapStep = 'done';
      this.authenticated = true;
      this.c.log.info(`iSCSI CHAP authentication accepted${mi !== undefined ? ' (mutual)' : ''}`, { chapName: n });
      return true;
    }
    return this.authenticated;
  }
}
