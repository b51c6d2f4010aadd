// attach and mount serve until told to stop. The first SIGINT or SIGTERM
// starts a clean detach; a second one while that runs gives up on it.

/** Resolves with the first SIGINT or SIGTERM (or when `also` resolves first). */
export function waitForStop(also?: Promise<string>): Promise<string> {
  return new Promise((resolve) => {
    let stopping = false;
    const on = (sig: NodeJS.Signals): void => {
      if (stopping) {
        process.stderr.write(`rblk: ${sig} again: exiting without a clean detach\n`);
        process.exit(1);
      }
      stopping = true;
      resolve(sig);
    };
    process.on('SIGINT', on);
    process.on('SIGTERM', on);
    also?.then(
      (why) => {
        stopping = true;
        resolve(why);
      },
      (e: unknown) => {
        stopping = true;
        resolve(e instanceof Error ? e.message : String(e));
      },
    );
  });
}
