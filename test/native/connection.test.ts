import test from 'ava';
import { Domain, FabricError, type Endpoint } from '../../native/fabric.js';
import { connectPair, loopbackDomains, PROVIDERS } from '../helpers/fabric-pair.js';

for (const provider of PROVIDERS) {
  test.serial(`${provider}: connect and accept carry private data both ways`, async (t) => {
    const { server, client, listener } = loopbackDomains(t, provider);
    t.true(listener.port > 0, 'port 0 picks a free port and reports it');
    t.is(listener.address, '127.0.0.1');
    const seen: Buffer[] = [];
    let accepted: Promise<Endpoint> | undefined;
    listener.on('connection', (req) => {
      seen.push(req.privateData);
      accepted = req.accept({ privateData: Buffer.from('target-says-hi') });
    });
    const ep = await client.connect({ address: '127.0.0.1', port: listener.port, privateData: Buffer.from('initiator-hello') });
    t.is(seen.length, 1);
    t.is(seen[0].toString(), 'initiator-hello');
    t.is(ep.peerPrivateData.subarray(0, 14).toString(), 'target-says-hi');
    t.false(ep.isClosed);
    const serverEp = await accepted;
    t.false(serverEp?.isClosed);
    await ep.close();
    t.true(ep.isClosed);
  });

  test.serial(`${provider}: a rejected connection rejects with FI_ECONNREFUSED and carries the reject's private data`, async (t) => {
    const { server, client, listener } = loopbackDomains(t, provider);
    listener.on('connection', (req) => req.reject(Buffer.from('go-away')));
    const err = await t.throwsAsync(client.connect({ address: '127.0.0.1', port: listener.port, privateData: Buffer.from('x') }), {
      instanceOf: FabricError,
    });
    t.is(err?.code, 'FI_ECONNREFUSED');
    t.is(err?.errno, 111);
    const pd = (err as FabricError & { privateData?: Buffer }).privateData;
    // tcp delivers the reject's private data; sockets drops it (provider behaviour, docs/protocol.md).
    if (provider === 'tcp') t.is(pd?.subarray(0, 7).toString(), 'go-away');
    else t.pass();
  });

  test.serial(`${provider}: connecting to a closed port rejects with FI_ECONNREFUSED`, async (t) => {
    const probe = Domain.open({ provider, address: '127.0.0.1' });
    const l = probe.listen({ address: '127.0.0.1', port: 0 });
    const port = l.port;
    await probe.close(); // the port is now closed
    const client = Domain.open({ provider, address: '127.0.0.1' });
    t.teardown(() => client.close());
    const err = await t.throwsAsync(client.connect({ address: '127.0.0.1', port, timeoutMs: 5000 }), { instanceOf: FabricError });
    t.is(err?.code, 'FI_ECONNREFUSED');
    // tcp reports the refusal as an event-queue error; sockets fails fi_connect itself.
    t.true(err?.op === 'fi_eq_read' || err?.op === 'fi_connect', err?.op);
  });

  test.serial(`${provider}: peer shutdown closes the other side and rejects its pending operations`, async (t) => {
    const pair = await connectPair(provider, { serverPrepare: () => undefined });
    t.teardown(() => pair.close());
    const mr = pair.server.register(4096);
    const closed = new Promise<void>((resolve) => pair.serverEp.once('close', () => resolve()));
    // A receive that will never be matched is simply dropped; an RMA read in
    // flight when the peer leaves must reject.
    pair.serverEp.postReceive(mr.slice(0, 64));
    await pair.clientEp.close();
    await closed;
    t.true(pair.serverEp.isClosed);
    const err = await t.throwsAsync(pair.serverEp.send(mr.slice(0, 8)));
    t.is((err as FabricError).code, 'ERR_CLOSED');
  });
}

test.serial('unknown provider gives a clear fi_getinfo error', (t) => {
  const err = t.throws(() => Domain.open({ provider: 'no-such-provider' }), { instanceOf: FabricError });
  t.is(err?.code, 'FI_ENODATA');
  t.regex(err?.message ?? '', /no libfabric provider 'no-such-provider'/);
});
