// Operational parameter negotiation (RFC 7143 §6.2, §13): the target answers
// every key the initiator offers, with the result function each key has
// (list: first of the initiator's values the target supports; numeric:
// minimum or maximum; boolean: AND or OR), and declares its own
// MaxRecvDataSegmentLength. What rblkd offers and why is in docs/iscsi.md.

export type Digest = 'None' | 'CRC32C';

/** The values one connection and its session run with after login. */
export interface SessionParams {
  headerDigest: Digest;
  dataDigest: Digest;
  /** What the initiator receives at most per PDU (its declaration): our Data-In, R2T-less texts, NOP-In. */
  initiatorMaxRecvDataSegment: number;
  /** What we receive at most per PDU (our declaration). */
  targetMaxRecvDataSegment: number;
  maxBurstLength: number;
  firstBurstLength: number;
  initialR2T: boolean;
  immediateData: boolean;
  maxOutstandingR2T: number;
  dataPduInOrder: boolean;
  dataSequenceInOrder: boolean;
  defaultTime2Wait: number;
  defaultTime2Retain: number;
  errorRecoveryLevel: number;
  maxConnections: number;
}

/** RFC 7143 §13 defaults: what applies to a key nobody offered. */
export function defaultParams(targetMaxRecv: number): SessionParams {
  return {
    headerDigest: 'None',
    dataDigest: 'None',
    initiatorMaxRecvDataSegment: 8192,
    targetMaxRecvDataSegment: targetMaxRecv,
    maxBurstLength: 262144,
    firstBurstLength: 65536,
    initialR2T: true,
    immediateData: true,
    maxOutstandingR2T: 1,
    dataPduInOrder: true,
    dataSequenceInOrder: true,
    defaultTime2Wait: 2,
    defaultTime2Retain: 20,
    errorRecoveryLevel: 0,
    maxConnections: 1,
  };
}

/** What this target supports at most (docs/iscsi.md "Negotiated parameters"). */
export interface TargetOffer {
  /** Our MaxRecvDataSegmentLength: the largest data segment we accept. */
  maxRecvDataSegment: number;
  /** At most limits.max_io: one R2T sequence never exceeds a command. */
  maxBurstLength: number;
  firstBurstLength: number;
  maxOutstandingR2T: number;
}

export class NegotiationError extends Error {}

const yesNo = (v: string, key: string): boolean => {
  if (v === 'Yes') return true;
  if (v === 'No') return false;
  throw new NegotiationError(`${key}=${v} is neither Yes nor No`);
};

function numeric(v: string, key: string, min: number, max: number): number {
  // RFC 7143 §5.1: decimal, or hex with 0x; no sign, no fraction.
  const n = /^0x[0-9a-fA-F]+$/.test(v) ? parseInt(v.slice(2), 16) : /^[0-9]+$/.test(v) ? Number(v) : NaN;
  if (!Number.isSafeInteger(n) || n < min || n > max) throw new NegotiationError(`${key}=${v} is not a number in ${min}..${max}`);
  return n;
}

/** Keys a login declares rather than negotiates, handled by the login itself. */
export const LOGIN_KEYS = new Set(['InitiatorName', 'TargetName', 'SessionType', 'InitiatorAlias', 'TargetAlias', 'TargetPortalGroupTag', 'TargetAddress', 'AuthMethod']);

/**
 * Answers the operational keys of one login or text request, updating
 * `p`. Keys that are not operational and not login keys are answered
 * NotUnderstood (RFC 7143 §6.2.1); a value out of its range is a
 * NegotiationError, which the login turns into an initiator error.
 */
export function negotiate(pairs: readonly [string, string][], p: SessionParams, offer: TargetOffer, answerDeclarative: boolean): [string, string][] {
  const out: [string, string][] = [];
  for (const [key, value] of pairs) {
    if (LOGIN_KEYS.has(key) || key.startsWith('CHAP_')) continue;
    switch (key) {
      case 'HeaderDigest':
      case 'DataDigest': {
        const pick = value.split(',').find((d) => d === 'None' || d === 'CRC32C') as Digest | undefined;
        if (pick === undefined) out.push([key, 'Reject']);
        else {
          out.push([key, pick]);
          if (key === 'HeaderDigest') p.headerDigest = pick;
          else p.dataDigest = pick;
        }
        break;
      }
      case 'MaxConnections':
        numeric(value, key, 1, 65535);
        p.maxConnections = 1;
        out.push([key, '1']);
        break;
      case 'InitialR2T':
        // OR: Yes when either side says Yes; rblkd is happy without (No).
        p.initialR2T = yesNo(value, key);
        out.push([key, p.initialR2T ? 'Yes' : 'No']);
        break;
      case 'ImmediateData':
        // AND: rblkd takes immediate data (Yes), so the initiator decides.
        p.immediateData = yesNo(value, key);
        out.push([key, p.immediateData ? 'Yes' : 'No']);
        break;
      case 'MaxRecvDataSegmentLength':
        // Declarative (§13.12): what the initiator can receive; no answer needed, ours is declared separately.
        p.initiatorMaxRecvDataSegment = numeric(value, key, 512, 16777215);
        break;
      case 'MaxBurstLength':
        p.maxBurstLength = Math.min(numeric(value, key, 512, 16777215), offer.maxBurstLength);
        out.push([key, String(p.maxBurstLength)]);
        break;
      case 'FirstBurstLength':
        p.firstBurstLength = Math.min(numeric(value, key, 512, 16777215), offer.firstBurstLength);
        out.push([key, String(p.firstBurstLength)]);
        break;
      case 'DefaultTime2Wait':
        p.defaultTime2Wait = Math.max(numeric(value, key, 0, 3600), 0);
        out.push([key, String(p.defaultTime2Wait)]);
        break;
      case 'DefaultTime2Retain':
        // Error recovery level 0 keeps nothing for a lost connection: 0 is honest.
        numeric(value, key, 0, 3600);
        p.defaultTime2Retain = 0;
        out.push([key, '0']);
        break;
      case 'MaxOutstandingR2T':
        p.maxOutstandingR2T = Math.min(numeric(value, key, 1, 65535), offer.maxOutstandingR2T);
        out.push([key, String(p.maxOutstandingR2T)]);
        break;
      case 'DataPDUInOrder':
        // OR: rblkd wants in-order PDUs (Yes), so the answer is always Yes.
        yesNo(value, key);
        out.push([key, 'Yes']);
        break;
      case 'DataSequenceInOrder':
        yesNo(value, key);
        out.push([key, 'Yes']);
        break;
      case 'ErrorRecoveryLevel':
        // Minimum: rblkd does level 0 only (docs/iscsi.md).
        numeric(value, key, 0, 2);
        p.errorRecoveryLevel = 0;
        out.push([key, '0']);
        break;
      case 'IFMarker':
      case 'OFMarker':
        // RFC 3720 markers (removed by RFC 7143): AND, and rblkd has none.
        out.push([key, 'No']);
        break;
      case 'IFMarkInt':
      case 'OFMarkInt':
        out.push([key, 'Irrelevant']);
        break;
      case 'iSCSIProtocolLevel':
        // RFC 7144 §13.1: 1 is RFC 7143.
        out.push([key, String(Math.min(numeric(value, key, 0, 31), 1))]);
        break;
      case 'TaskReporting':
        out.push([key, 'RFC3720']);
        break;
      default:
        out.push([key, 'NotUnderstood']);
    }
  }
  if (answerDeclarative) out.push(['MaxRecvDataSegmentLength', String(p.targetMaxRecvDataSegment)]);
  // RFC 7143 §13.14: FirstBurstLength may not exceed MaxBurstLength.
  if (p.firstBurstLength > p.maxBurstLength) p.firstBurstLength = p.maxBurstLength;
  return out;
}
