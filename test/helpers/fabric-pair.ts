// A connected pair of endpoints over a real libfabric provider on loopback:
// a "target" side (listener, local-only pool) and an "initiator" side.
import type { ExecutionContext } from 'ava';
import { addon } from '../../native/binding.js';
import { Domain, mrModeFromEnv, type Endpoint, type Listener, type MrModeRequest, type Slice } from '../../native/fabric.js';
import { pattern } from '../../bench/kit/pattern.js';
import { until as waitUntil } from '../../bench/kit/wait.js';

export const PROVIDERS = ['tcp', 'sockets'] as const;
export type Provider = (typeof PROVIDERS)[number];
/** FI_EP_RDM providers (docs/transport.md "RDM endpoints"). */
export const RDM_PROVIDERS = ['shm', 'tcp;ofi_rxm'] as const;

const BASIC_BITS = addon().constants.FI_MR_VIRT_ADDR | addon().constants.FI_MR_ALLOCATED | addon().constants.FI_MR_PROV_KEY;

/**
 * Opens a loopback domain; mrMode defaults to $RBLK_FI_MR_MODE as Domain.open's
 * does. Under 'basic' it checks the domain really addresses by virtual address
 * with provider keys, so that test pass can never quietly run the default rules.
 */
export function openDomain(provider: string, mrMode: MrModeRequest = mrModeFromEnv()): Domain {
  const d = Domain.open({ provider, address: '127.0.0.1', mrMode });
  if (mrMode === 'basic' && (d.info.mrMode & BASIC_BITS) !== BASIC_BITS) {
    const got = d.info.mrMode;
    void d.close().catch(() => undefined);
    throw new Error(`${provider}: mrMode 'basic' was asked for but the domain reports mr_mode ${got}`);
  }
  return d;
}

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
  opts: { serverPrepare?: (ep: Endpoint) => void; clientPrepare?: (ep: Endpoint) => void; mrMode?: MrModeRequest } = {},
): Promise<Pair> {
  const server = openDomain(provider, opts.mrMode);
  const client = openDomain(provider, opts.mrMode);
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
export function loopbackDomains(
  t: { teardown(fn: () => Promise<void>): void },
  provider: string,
  mrMode?: MrModeRequest,
): { server: Domain; client: Domain; listener: Listener } {
  const server = openDomain(provider, mrMode);
  const client = openDomain(provider, mrMode);
  t.teardown(async () => {
    await client.close();
    await server.close();
  });
  return { server, client, listener: server.listen({ address: '127.0.0.1', port: 0 }) };
}

/** Resolves once cond() is true, checking after every turn of the event loop: fabric tests drive progress from the loop. */
export function until(cond: () => boolean, what: string): Promise<void> {
  return waitUntil(cond, what, { everyMs: 0 });
}

export { pattern };

/**
 * `count` sends of different lengths, each its sequence number and a pattern
 * seeded by it, never more in flight than the `posted` receives: every one
 * arrives, intact and in order (the messaging suites of MSG and RDM endpoints).
 */
export async function sendsInOrder(t: ExecutionContext, provider: string, count: number, posted: number): Promise<void> {
  const received: number[] = [];
  let bad = 0;
  const pair = await connectPair(provider, {
    serverPrepare: (ep) => {
      const mr = ep.domain.register(posted * 256);
      ep.onReceive = (slice: Slice, length: number) => {
        const seq = slice.buffer.readUInt32BE(0);
        // Each message is its sequence number followed by a pattern seeded by it.
        if (length !== 4 + (seq % 200) || !slice.buffer.subarray(4, length).equals(pattern(seq % 200, seq + 1))) bad++;
        received.push(seq);
        ep.postReceive(slice);
      };
      for (let i = 0; i < posted; i++) ep.postReceive(mr.slice(i * 256, 256));
    },
  });
  t.teardown(() => pair.close());
  const mr = pair.client.register(posted * 256);
  let sent = 0;
  while (sent < count) {
    // Never more in flight than the receiver has buffers posted (the SRP credit rule).
    await until(() => sent - received.length < posted, 'receive credits');
    const batch: Promise<number>[] = [];
    while (sent < count && sent - received.length < posted && batch.length < posted) {
      const slot = mr.slice((sent % posted) * 256, 4 + (sent % 200));
      slot.buffer.writeUInt32BE(sent, 0);
      pattern(sent % 200, sent + 1).copy(slot.buffer, 4);
      batch.push(pair.clientEp.send(slot));
      sent++;
    }
    await Promise.all(batch);
  }
  await until(() => received.length === count, 'all messages');
  t.is(bad, 0, 'every payload matched');
  t.deepEqual(received, Array.from({ length: count }, (_, i) => i), 'in order');
}
