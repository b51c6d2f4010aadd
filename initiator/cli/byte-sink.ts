// Where `read` puts the bytes: a file, or stdout with its backpressure
// respected. A reader that goes away (`| head`) ends the command quietly,
// the way cat ends on SIGPIPE, but with a failing status.
import { once } from 'node:events';
import { open, type FileHandle } from 'node:fs/promises';
import { QuietExit } from './cli-error.js';

export interface ByteSink {
  write(data: Buffer): Promise<void>;
  close(): Promise<void>;
}

export async function fileSink(path: string): Promise<ByteSink> {
  const fh: FileHandle = await open(path, 'w');
  return {
    async write(data) {
      let done = 0;
      while (done < data.length) done += (await fh.write(data, done, data.length - done)).bytesWritten;
    },
    close: () => fh.close(),
  };
}

export function stdoutSink(out: NodeJS.WriteStream = process.stdout): ByteSink {
  let broken: Error | null = null;
  const onError = (err: Error): void => {
    broken = err;
  };
  out.on('error', onError);
  const check = (): void => {
    if (broken === null) return;
    if ((broken as NodeJS.ErrnoException).code === 'EPIPE') throw new QuietExit(1, 'stdout was closed by the reader');
    throw broken;
  };
  return {
    async write(data) {
      check();
      if (!out.write(data)) {
        // once() rejects when 'error' comes first; onError has kept that error for check().
        await once(out, 'drain').catch(() => undefined);
      }
      check();
    },
    async close() {
      await new Promise<void>((resolve) => out.write('', () => resolve()));
      out.off('error', onError);
      check();
    },
  };
}
