// The mode pages rblk keeps per logical unit: Caching (SBC-4 6.5.5) with a
// changeable WCE, and Control (SPC-5 7.5.8) with a changeable D_SENSE and SWP.
// The pages are shared by every nexus (SPC-5 7.5.1 allows either way), so a
// change raises MODE PARAMETERS CHANGED for the others.
import { CachingBits, CACHING_PAGE_LENGTH, ControlBits, CONTROL_PAGE_LENGTH } from '../../../protocol/scsi/mode.js';
import { ModePage } from '../../../protocol/scsi/opcodes.js';
import { PARAMETER_LIST_LENGTH_ERROR } from '../../../protocol/scsi/sense-codes.js';
import { check, invalidParameter, type Failure } from '../outcome.js';

export interface ModeSettings {
  /** Write cache enabled: when false every write is written through (FUA). */
  readonly wce: boolean;
  /** Descriptor-format sense data. */
  readonly dSense: boolean;
  /**
   * Software write protect (SPC-5 7.5.8): while set, commands that change the
   * medium fail with DATA PROTECT, LOGICAL UNIT SOFTWARE WRITE PROTECTED, from
   * every nexus and front end (target/scsi/access.ts). Not saved: a restart clears it.
   */
  readonly swp: boolean;
}

export type PageKind = 'current' | 'changeable' | 'default';

/** Pages in the order MODE SENSE returns them for page 3Fh (ascending, SPC-5 6.13). */
export const SUPPORTED_MODE_PAGES: readonly number[] = [ModePage.CACHING, ModePage.CONTROL];

function cachingPage(kind: PageKind, s: ModeSettings): Buffer {
  const p = Buffer.alloc(CACHING_PAGE_LENGTH);
  p[0] = ModePage.CACHING;
  p[1] = CACHING_PAGE_LENGTH - 2;
  if (kind === 'changeable') p[2] = CachingBits.WCE;
  else p[2] = s.wce ? CachingBits.WCE : 0;
  return p;
}

function controlPage(kind: PageKind, s: ModeSettings): Buffer {
  const p = Buffer.alloc(CONTROL_PAGE_LENGTH);
  p[0] = ModePage.CONTROL;
  p[1] = CONTROL_PAGE_LENGTH - 2;
  if (kind === 'changeable') {
    p[2] = ControlBits.D_SENSE;
    p[4] = ControlBits.SWP;
    return p;
  }
  // GLTSD: no log parameters are saved. QUEUE ALGORITHM MODIFIER 1: the
  // target may reorder simple tasks, as every tag-queueing target does.
  p[2] = ControlBits.GLTSD | (s.dSense ? ControlBits.D_SENSE : 0);
  p[3] = 0x10;
  if (kind === 'current' && s.swp) p[4] = ControlBits.SWP;
  // BUSY TIMEOUT PERIOD FFFFh: unlimited (SPC-5 table 455).
  p.writeUInt16BE(0xffff, 8);
  return p;
}

export function buildModePage(code: number, kind: PageKind, s: ModeSettings): Buffer | undefined {
  if (code === ModePage.CACHING) return cachingPage(kind, s);
  if (code === ModePage.CONTROL) return controlPage(kind, s);
  return undefined;
}

/** The bytes MODE SENSE returns after header and descriptors, or undefined for an unsupported page. */
export function buildModePages(code: number, kind: PageKind, s: ModeSettings): Buffer | undefined {
  if (code === ModePage.ALL) {
    return Buffer.concat(SUPPORTED_MODE_PAGES.flatMap((c) => buildModePage(c, kind, s) ?? []));
  }
  return buildModePage(code, kind, s);
}

/**
 * Validates every page in a MODE SELECT list before changing anything, and
 * returns the settings that result. A bit outside the changeable mask that
 * differs from the current value is INVALID FIELD IN PARAMETER LIST; a page cut
 * short by the list length is PARAMETER LIST LENGTH ERROR (SPC-5 6.11).
 */
export function applyModePages(list: Buffer, base: number, current: ModeSettings): ModeSettings | Failure {
  let next = current;
  for (let at = 0; at < list.length; ) {
    if (at + 2 > list.length) return check(PARAMETER_LIST_LENGTH_ERROR);
    if ((list[at] & 0x40) !== 0) return invalidParameter(base + at, 6);
    const code = list[at] & 0x3f;
    const cur = buildModePage(code, 'current', current);
    const mask = buildModePage(code, 'changeable', current);
    if (!cur || !mask) return invalidParameter(base + at);
    if (list[at + 1] !== cur.length - 2) return invalidParameter(base + at + 1);
    if (at + cur.length > list.length) return check(PARAMETER_LIST_LENGTH_ERROR);
    for (let i = 2; i < cur.length; i++) {
      const diff = (list[at + i] ^ cur[i]) & ~mask[i] & 0xff;
      if (diff !== 0) return invalidParameter(base + at + i, 31 - Math.clz32(diff));
    }
    if (code === ModePage.CACHING) next = { ...next, wce: (list[at + 2] & CachingBits.WCE) !== 0 };
    if (code === ModePage.CONTROL) next = { ...next, dSense: (list[at + 2] & ControlBits.D_SENSE) !== 0, swp: (list[at + 4] & ControlBits.SWP) !== 0 };
    at += cur.length;
  }
  return next;
}
