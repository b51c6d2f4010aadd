// What the common header of a host's PDU can show wrong (NVMe TCP Transport
// 1.0 §3.6.2.1), checked before the rest of the PDU is buffered, and the
// Fatal Error Status a C2HTermReq then carries (§3.6.2.5, docs/nvme.md "Bad input").
import { DIGEST_LENGTH, Fes, HLEN, PduFlag, PduType, type CommonHeader, type Digests } from '../../protocol/nvme/pdu.js';

/** MAXH2CDATA offered in ICResp (§3.6.2.3): the largest H2CData a host may send. */
export const MAX_H2C_DATA = 128 * 1024;

/** Why a connection ends: FES and FEI of its C2HTermReq, and the log line's reason. */
export interface Fatal {
  fes: number;
  fei: number;
  why: string;
}

/** What the common header alone can show wrong (§3.6.2.1), before the rest is buffered: PLEN is bounded here. */
export function checkHeader(h: CommonHeader, beforeIc: boolean, digests: Digests, inCapsuleMax: number): Fatal | null {
  const known = h.type === PduType.ICReq || h.type === PduType.H2CTermReq || h.type === PduType.CapsuleCmd || h.type === PduType.H2CData;
  if (!known) return { fes: Fes.InvalidHeaderField, fei: 0, why: `PDU type ${h.type} is not one a host sends` };
  if (beforeIc !== (h.type === PduType.ICReq)) return { fes: Fes.PduSequenceError, fei: 0, why: `PDU type ${h.type} ${beforeIc ? 'before' : 'after'} ICReq` };
  if (h.hlen !== HLEN[h.type]) return { fes: Fes.InvalidHeaderField, fei: 2, why: `HLEN ${h.hlen} for PDU type ${h.type}` };
  if (h.type === PduType.ICReq) return h.plen === 128 ? null : { fes: Fes.InvalidHeaderField, fei: 4, why: `ICReq PLEN ${h.plen}` };
  if (h.type === PduType.H2CTermReq) return h.plen >= 24 && h.plen <= 152 ? null : { fes: Fes.InvalidHeaderField, fei: 4, why: `H2CTermReq PLEN ${h.plen}` };
  const hd = digests.header;
  if (((h.flags & PduFlag.HDGSTF) !== 0) !== hd) return { fes: Fes.InvalidHeaderField, fei: 1, why: 'HDGSTF differs from what ICReq negotiated' };
  const min = h.hlen + (hd ? DIGEST_LENGTH : 0);
  if (h.plen < min) return { fes: Fes.InvalidHeaderField, fei: 4, why: `PLEN ${h.plen} shorter than the header` };
  if (h.plen === min) return null;
  // The most a PDU of this type can hold, so that no more than that is ever buffered (docs/nvme.md "Bad input").
  const most = (h.type === PduType.CapsuleCmd ? inCapsuleMax : MAX_H2C_DATA) + min + 2 * DIGEST_LENGTH + 128;
  if (h.plen > most) {
    return h.type === PduType.H2CData
      ? { fes: Fes.DataTransferLimitExceeded, fei: 0, why: `H2CData PLEN ${h.plen} exceeds MAXH2CDATA` }
      : { fes: Fes.InvalidHeaderField, fei: 4, why: `CapsuleCmd PLEN ${h.plen} exceeds IOCCSZ` };
  }
  const dd = (h.flags & PduFlag.DDGSTF) !== 0;
  if (dd !== digests.data) return { fes: Fes.InvalidHeaderField, fei: 1, why: 'DDGSTF differs from what ICReq negotiated' };
  if (h.pdo < min || h.pdo >= h.plen - (dd ? DIGEST_LENGTH : 0)) return { fes: Fes.InvalidHeaderField, fei: 3, why: `PDO ${h.pdo} with PLEN ${h.plen}` };
  const dataLen = h.plen - h.pdo - (dd ? DIGEST_LENGTH : 0);
  if (h.type === PduType.CapsuleCmd && dataLen > inCapsuleMax) {
    return { fes: Fes.InvalidHeaderField, fei: 4, why: `${dataLen} bytes of in-capsule data exceed IOCCSZ` };
  }
  if (h.type === PduType.H2CData && dataLen > MAX_H2C_DATA) return { fes: Fes.DataTransferLimitExceeded, fei: 0, why: `H2CData of ${dataLen} bytes exceeds MAXH2CDATA` };
  return null;
}
