// The Fabrics Connect command decided (NVMe-oF 1.1 §3.3): which controller a
// new queue joins or makes, or why not, with the status and the offending
// field (docs/nvme.md "Controllers"). connection.ts turns a grant into a queue.
import { randomBytes } from 'node:crypto';
import { parseDhchapSecret, type DhchapKey } from '../../protocol/nvme/auth.js';
import { DISCOVERY_NQN, readNqn, Status } from '../../protocol/nvme/command.js';
import type { ConnectionEnvironment, TargetLogger } from '../connection/environment.js';
import { Controller, MIN_ADMIN_QUEUE, type QueueConnection } from './controller.js';
import type { Completion } from './io.js';
import type { Subsystem } from './subsystem.js';

/** The largest queue a Connect may ask for (CAP.MQES + 1): limits.queue_depth, at least the admin queue's 32. */
export function maxQueueSize(env: ConnectionEnvironment): number {
  return Math.min(1024, Math.max(MIN_ADMIN_QUEUE, env.limits.queueDepth));
}

export interface ConnectGrant {
  readonly controller: Controller;
  readonly qid: number;
  /** SQSIZE as sent: 0's based. */
  readonly sqsize: number;
  /** CATTR bit 2: the host disabled SQ flow control, so C2HData may carry SUCCESS in place of a CapsuleResp (TCP 1.0 §3.3.2). */
  readonly sqfcDisabled: boolean;
  readonly hostnqn: string;
  /** The host's DH-HMAC-CHAP key when the queue must authenticate before anything else (AUTHREQ.ATR set). */
  readonly auth: (DhchapKey & { unknownHost?: boolean }) | null;
}

/** Connect: SQE RECFMT 40-41, QID 42-43, SQSIZE 44-45, CATTR 46, KATO 48-51; data HOSTID 0-15, CNTLID 16-17, SUBNQN 256, HOSTNQN 512. */
export function connectQueue(
  sqe: Buffer,
  d: Buffer,
  o: { env: ConnectionEnvironment; subsystem: Subsystem; log: TargetLogger; queue: QueueConnection; discoveryOnly?: boolean },
): Completion | { completion: Completion; grant: ConnectGrant } {
  const { env, subsystem: sub, log } = o;
  const qid = sqe.readUInt16LE(42);
  const sqsize = sqe.readUInt16LE(44);
  const cattr = sqe[46];
  const kato = sqe.readUInt32LE(48);
  // Connect Invalid Parameters: DW0 IPO bits 15:0, IATTR bit 16 (0: in the SQE, 1: in the data).
  const invalid = (inData: boolean, ipo: number): Completion => ({ status: Status.ConnectInvalidParameters, dw0: ipo | (inData ? 1 << 16 : 0) });
  if (sqe.readUInt16LE(40) !== 0) return { status: Status.ConnectIncompatibleFormat };
  const hostid = Buffer.from(d.subarray(0, 16));
  const cntlid = d.readUInt16LE(16);
  const subnqn = readNqn(d, 256);
  const hostnqn = readNqn(d, 512);
  const discovery = subnqn === DISCOVERY_NQN;
  if (!discovery && subnqn !== sub.nqn) {
    log.warn(`NVMe Connect for unknown subsystem ${JSON.stringify(subnqn)}`, { host: hostnqn });
    return invalid(true, 256);
  }
  if (!discovery && o.discoveryOnly === true) {
    log.warn(`NVMe Connect for ${subnqn} on a discovery-only listener: the discovery log names its ports`, { host: hostnqn });
    return invalid(true, 256);
  }
  if (!hostnqn.startsWith('nqn.')) return invalid(true, 512);
  if (sqsize < 1 || sqsize + 1 > maxQueueSize(env) || (qid === 0 && sqsize + 1 < MIN_ADMIN_QUEUE)) return invalid(false, 44);
  if (env.admitSession() !== 'ok') return { status: Status.ConnectControllerBusy };
  // In-band authentication (docs/nvme.md "Authentication"): a host with a secret in auth.initiators
  // authenticates every queue; with auth.required a host without one is refused. Discovery is not authenticated.
  let auth: (DhchapKey & { unknownHost?: boolean }) | null = null;
  const secret = discovery ? null : env.secretFor(hostnqn);
  if (secret !== null) {
    try {
      auth = parseDhchapSecret(secret);
    } catch (e) {
      log.warn(`NVMe Connect refused: the host's secret in auth.initiators is unusable: ${e instanceof Error ? e.message : String(e)}`, { host: hostnqn });
      return { status: Status.ConnectInvalidHost };
    }
  } else if (env.authRequired && !discovery) {
    // Challenged with a key nobody knows and refused at its Reply, exactly as a wrong secret is, so that a
    // prober cannot tell which host NQNs are listed (docs/operations.md "Authentication is off unless").
    auth = { key: randomBytes(32), transform: 0, unknownHost: true };
  }
  let c: Controller;
  if (qid === 0) {
    if (cntlid !== 0xffff) return invalid(true, 16);
    // CNTLIDs from this gateway's range (subsystem.ts allocateCntlid), by its ALUA port group.
    const group = [...env.lunsFor(hostnqn).values()].find((m) => m.lu.portGroups !== undefined)?.lu.portGroups?.local.group ?? 1;
    const id = sub.allocateCntlid(group);
    if (id === null) return { status: Status.ConnectControllerBusy };
    c = new Controller({ cntlid: id, subsystem: sub, env, hostnqn, hostid, discovery, kato, maxQueueSize: maxQueueSize(env), log });
  } else {
    const found = sub.controllers.get(cntlid);
    if (found === undefined || found.discovery || found.hostnqn !== hostnqn || !found.hostid.equals(hostid) || discovery) return invalid(true, 16);
    if (!found.ready) return { status: Status.CommandSequenceError };
    if (qid > found.ioQueueLimit || found.queues.has(qid)) return invalid(false, 42);
    c = found;
  }
  c.queues.set(qid, o.queue);
  // Connect's DW0: CNTLID bits 15:0, AUTHREQ bits 31:16 with ATR at bit 17 (AUTHREQ bit 1; TP 8006, as Linux's NVME_CONNECT_AUTHREQ_ATR).
  const dw0 = c.cntlid | (auth ? 1 << 17 : 0);
  return { completion: { status: Status.Success, dw0 }, grant: { controller: c, qid, sqsize, sqfcDisabled: (cattr & 4) !== 0, hostnqn, auth } };
}
