// The control socket's request lines (docs/operations.md "The control socket"): bytes in,
// one item per line out, each a request's text or the reason it is refused. Every line
// ends in exactly one item, whatever its bytes: a blank line, invalid UTF-8 and a line
// longer than the limit are refused, and an over-long line is refused once, as soon as it
// passes the limit, and its bytes are dropped up to its newline, so memory stays bounded.
export type ControlLine = { text: string } | { refused: string };

const utf8 = new TextDecoder('utf-8', { fatal: true });

export class ControlLineReader {
  private parts: Buffer[] = [];
  private size = 0;
  /** The current line has passed the limit: its answer went, its bytes are dropped until its newline. */
  private overlong = false;

  constructor(private readonly max: number) {}

  /** The lines `chunk` completes (and the refusal of one it makes too long). */
  push(chunk: Buffer): ControlLine[] {
    const out: ControlLine[] = [];
    let start = 0;
    for (;;) {
      const nl = chunk.indexOf(0x0a, start);
      const piece = chunk.subarray(start, nl < 0 ? chunk.length : nl);
      if (!this.overlong) {
        if (this.size + piece.length > this.max) {
          this.overlong = true;
          this.parts = [];
          this.size = 0;
          out.push({ refused: `request longer than ${this.max} bytes` });
        } else if (piece.length > 0) {
          this.parts.push(piece);
          this.size += piece.length;
        }
      }
      if (nl < 0) return out;
      if (this.overlong) this.overlong = false;
      else out.push(this.take());
      start = nl + 1;
    }
  }

  /** At the end of the stream: a last line without its newline is still a request. */
  end(): ControlLine[] {
    if (this.overlong || this.size === 0) return [];
    return [this.take()];
  }

  private take(): ControlLine {
    const bytes = Buffer.concat(this.parts, this.size);
    this.parts = [];
    this.size = 0;
    let text: string;
    try {
      text = utf8.decode(bytes).trim();
    } catch {
      return { refused: 'the request is not valid UTF-8' };
    }
    if (text === '') return { refused: 'empty request: one JSON object per line, such as {"command":"status"}' };
    return { text };
  }
}
