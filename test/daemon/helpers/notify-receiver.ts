// A stand-in for systemd's notification socket. Node cannot bind an AF_UNIX
// datagram socket, so a python3 child binds it and prints every datagram it
// receives as one JSON string per line.
import { spawn } from 'node:child_process';
import { join } from 'node:path';
import type { ExecutionContext } from 'ava';

const SCRIPT = `
import json, socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.bind(sys.argv[1])
print("BOUND", flush=True)
while True:
    print(json.dumps(s.recv(65536).decode()), flush=True)
`;
const WAIT_MS = 20_000;

export interface NotifyMessage {
  /** KEY=VALUE fields of one datagram. */
  fields: Record<string, string>;
  /** When it arrived, as process.hrtime.bigint() (CLOCK_MONOTONIC ns). */
  at: bigint;
}

export interface NotifyReceiver {
  readonly path: string;
  readonly messages: NotifyMessage[];
  /** The first message at index >= from that has the field (and value, if given); its index and the message. */
  waitFor(key: string, value?: string, from?: number): Promise<{ index: number; message: NotifyMessage }>;
}

export async function notifyReceiver(t: ExecutionContext, dir: string): Promise<NotifyReceiver> {
  const path = join(dir, 'notify.sock');
  const py = spawn('python3', ['-c', SCRIPT, path], { stdio: ['ignore', 'pipe', 'inherit'] });
  const exited = new Promise<void>((r) => py.on('exit', () => r()));
  t.teardown(async () => {
    py.kill('SIGKILL');
    await exited;
  });
  const messages: NotifyMessage[] = [];
  const waiters = new Set<() => void>();
  let partial = '';
  let bound: () => void = () => undefined;
  const ready = new Promise<void>((r) => (bound = r));
  py.stdout!.setEncoding('utf8').on('data', (s: string) => {
    partial += s;
    const parts = partial.split('\n');
    partial = parts.pop()!;
    for (const line of parts) {
      if (line === 'BOUND') {
        bound();
        continue;
      }
      const text = JSON.parse(line) as string;
      const fields: Record<string, string> = {};
      for (const f of text.split('\n')) {
        const eq = f.indexOf('=');
        if (eq > 0) fields[f.slice(0, eq)] = f.slice(eq + 1);
      }
      messages.push({ fields, at: process.hrtime.bigint() });
    }
    for (const w of [...waiters]) w();
  });
  await Promise.race([
    ready,
    exited.then(() => {
      throw new Error('python3 could not bind the notify socket');
    }),
  ]);
  return {
    path,
    messages,
    waitFor(key, value, from = 0) {
      return new Promise((resolve, reject) => {
        const check = (): void => {
          for (let i = from; i < messages.length; i++) {
            const v = messages[i].fields[key];
            if (v !== undefined && (value === undefined || v === value)) {
              waiters.delete(check);
              clearTimeout(timer);
              resolve({ index: i, message: messages[i] });
              return;
            }
          }
        };
        const timer = setTimeout(() => {
          waiters.delete(check);
          reject(new Error(`no ${key}${value !== undefined ? `=${value}` : ''} notification; got ${JSON.stringify(messages.map((m) => m.fields))}`));
        }, WAIT_MS);
        waiters.add(check);
        check();
      });
    },
  };
}
