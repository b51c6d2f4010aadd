// The loss of one connection, as the waits of the commands on it see it
// (initiator/channel.ts). A promise kept pending for the connection's life and
// raced by every command (Promise.race) would keep one reaction per command
// until the loss, each holding what its command waited for: a session that
// never loses its connection would grow by every command it ever sent
// (docs/initiator.md "Memory over a long session"). A wait here unsubscribes
// as it ends, so the signal holds only the waits still running.

export class LostSignal {
  #error: Error | null = null;
  readonly #waits = new Set<(e: Error) => void>();

  /** The connection is lost: every running wait rejects with `e`, and every later one at once. */
  fail(e: Error): void {
    if (this.#error !== null) return;
    this.#error = e;
    const waits = [...this.#waits];
    this.#waits.clear();
    for (const w of waits) w(e);
  }

  /**
   * `p`'s outcome, or the loss if it comes first. What `p` yields after the
   * loss goes to `late`, so that nothing it holds (a pool chunk) is left
   * behind.
   */
  race<T>(p: Promise<T>, late: (value: T) => void): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      let lost = false;
      const onLost = (e: Error): void => {
        lost = true;
        reject(e);
      };
      p.then(
        (v) => {
          this.#waits.delete(onLost);
          if (lost) late(v);
          else resolve(v);
        },
        (e: unknown) => {
          this.#waits.delete(onLost);
          reject(e as Error);
        },
      );
      if (this.#error !== null) onLost(this.#error);
      else this.#waits.add(onLost);
    });
  }
}
