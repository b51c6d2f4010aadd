// AbortSignal on the library's I/O (docs/initiator.md "Cancelling I/O"). An
// abort settles the caller's promise at once; it does not withdraw a command
// from the session: one already sent runs to its end at the target and its
// completion is discarded, so an aborted write may still land.

/** What an aborted operation rejects with: the shape of Node's own AbortError. */
export class AbortError extends Error {
  readonly code = 'ABORT_ERR';

  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'AbortError';
  }
}

function abortError(what: string, signal: AbortSignal): AbortError {
  return new AbortError(`${what}: aborted`, { cause: signal.reason });
}

/**
 * Runs `start` unless the signal is already aborted, and settles with it,
 * or with an AbortError as soon as the signal fires, whichever comes first.
 * A completion after the abort is dropped (its failure included).
 */
export function abortable<T>(signal: AbortSignal | undefined, what: string, start: () => Promise<T>): Promise<T> {
  if (signal === undefined) return start();
  if (signal.aborted) return Promise.reject(abortError(what, signal));
  return new Promise<T>((resolve, reject) => {
    const onAbort = (): void => reject(abortError(what, signal));
    signal.addEventListener('abort', onAbort, { once: true });
    let work: Promise<T>;
    try {
      work = start();
    } catch (e) {
      signal.removeEventListener('abort', onAbort);
      reject(e as Error);
      return;
    }
    work.then(
      (v) => {
        signal.removeEventListener('abort', onAbort);
        resolve(v);
      },
      (e: unknown) => {
        signal.removeEventListener('abort', onAbort);
        reject(e as Error);
      },
    );
  });
}
