// A connected pair of endpoints over a real libfabric provider on loopback:
// a "target" side (listener, local-only pool) and an "initiator" side.
import { Domain, type Endpoint, type Listener } from '../../native/fabric.js';

export const PROVIDERS = ['tcp', 'sockets'] as const;
export type Provider = (typeof PROVIDERS)[number];

export interface Pair {
  server: Domain;
  client: Domain;
  listener: Listener;
  serverEp: Endpoint;
  clientEp: Endpoint;
  close(): Promise<void>;
}

export async function connectPair(
  provider: string,
  opts: { serverPrepare?: (ep: Endpoint) => void; clientPrepare?: (ep: Endpoint) => void } = {},
): Promise<Pair> {
  const server = Domain.open({ provider, address: '127.0.0.1' });
  const client = Domain.open({ provider, address: '127.0.0.1' });
  const listener = server.listen({ address: '127.0.0.1', port: 0 });
  const accepted = new Promise<Endpoint>((resolve, reject) => {
    listener.once('connection', (req) => {
      req.accept({ prepare: opts.serverPrepare }).then(resolve, reject);
    });
  });
  const clientEp = await client.connect({ address: '127.0.0.1', port: listener.port, prepare: opts.clientPrepare });
  const serverEp = await accepted;
  return {
    server,
    client,
    listener,
    serverEp,
    clientEp,
    async close() {
      await client.close();
      await server.close();
    },
  };
}

/** A server and a client domain on loopback, and a listener on port 0; the domains are closed in teardown. */
export function loopbackDomains(t: { teardown(fn: () => Promise<void>): void }, provider: string): { server: Domain; client: Domain; listener: Listener } {
  const server = Domain.open({ provider, address: '127.0.0.1' });
  const client = Domain.open({ provider, address: '127.0.0.1' });
  t.teardown(async () => {
    await client.close();
    await server.close();
  });
  return { server, client, listener: server.listen({ address: '127.0.0.1', port: 0 }) };
}

/** Resolves once cond() is true, checking after every turn of the event loop (bounded). */
export async function until(cond: () => boolean, what: string, maxTurns = 200_000): Promise<void> {
  for (let i = 0; i < maxTurns; i++) {
    if (cond()) return;
    await new Promise((r) => setImmediate(r));
  }
  throw new Error(`gave up waiting for ${what}`);
}

export function pattern(size: number, seed: number): Buffer {
  const b = Buffer.allocUnsafe(size);
  let x = seed >>> 0 || 1;
  for (let i = 0; i < size; i++) {
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    b[i] = x & 0xff;
  }
  return b;
}
