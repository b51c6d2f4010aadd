// One Text Request/Response exchange in the full feature phase (RFC 7143
// §11.10, §11.11), named by the initiator's ITT and, once the target asks for
// more, the target's TTT. Both directions may span several PDUs:
// - the initiator's text, continued with the C bit (§11.10.2), is gathered
//   until a request without C; each continued request is answered by an empty
//   Text Response (F and C clear) carrying the TTT to copy;
// - the target's answer, when longer than the initiator's
//   MaxRecvDataSegmentLength, goes out in parts with C set (§11.11.2); the
//   initiator pulls each next part with an empty Text Request of the same ITT
//   and TTT.
// Key=value pairs may be split anywhere between PDUs: text is parsed only once
// whole, and the answer is cut at byte boundaries.

/** The most text one request may gather, as for login (RFC 7143 §6.6 lets the target bound it). */
export const MAX_TEXT_REQUEST = 64 * 1024;

export class TextExchangeError extends Error {}

export interface TextPart {
  data: Buffer;
  /** More of the answer follows (the C bit). */
  more: boolean;
  /** The exchange ends with this part (the F bit): the request was final and nothing is left. */
  done: boolean;
}

export class TextExchange {
  /** The TTT the initiator must copy to go on, once one was handed out. */
  ttt: number | null = null;
  private request: Buffer[] = [];
  private bytes = 0;
  private pending: Buffer | null = null;
  private requestFinal = false;

  constructor(readonly itt: number) {}

  /** Whether part of the target's answer is still to be pulled. */
  get answering(): boolean {
    return this.pending !== null;
  }

  /** Gathers one request's text. */
  add(data: Buffer): void {
    this.bytes += data.length;
    if (this.bytes > MAX_TEXT_REQUEST) throw new TextExchangeError(`Text Request text over ${MAX_TEXT_REQUEST} bytes`);
    if (data.length > 0) this.request.push(Buffer.from(data));
  }

  /** The text gathered so far, whole; the next request starts a new text. */
  take(): Buffer {
    const whole = Buffer.concat(this.request);
    this.request = [];
    this.bytes = 0;
    return whole;
  }

  /** The answer to the text just taken; `final`: the request that ended it had F set. */
  answer(data: Buffer, final: boolean): void {
    this.pending = data;
    this.requestFinal = final;
  }

  /**
   * The next Text Response's data, at most `max` bytes: the next part of the
   * answer, or nothing while the initiator's text is still coming.
   */
  nextPart(max: number): TextPart {
    if (this.pending === null) return { data: Buffer.alloc(0), more: false, done: false };
    const data = this.pending.subarray(0, max);
    const rest = this.pending.subarray(data.length);
    const more = rest.length > 0;
    this.pending = more ? rest : null;
    return { data, more, done: !more && this.requestFinal };
  }
}
