// The far side of bench/transport.ts, in its own process as a real peer
// would be: echoes every message back, and exposes a remote-accessible
// region whose address, key and length it hands over in the accept's private
// data. Prints {"port":N} once listening; exits when its parent closes stdin.
import { Domain, type Endpoint, type Slice } from '../native/fabric.js';

const provider = process.argv[2] ?? 'tcp';
const regionSize = Number(process.argv[3] ?? 64 << 20);
const busyPollMicros = Number(process.argv[4] ?? 0);
const domain = Domain.open({ provider, address: '127.0.0.1' });
const region = domain.register(regionSize, { remote: true });
const recvPool = domain.register(256 * 4096);
const listener = domain.listen({ address: '127.0.0.1', port: 0 });
const endpoints: Endpoint[] = [];

listener.on('connection', (req) => {
  const pd = Buffer.alloc(20);
  pd.writeBigUInt64BE(region.remoteBase, 0);
  pd.writeBigUInt64BE(region.key, 8);
  pd.writeUInt32BE(region.size, 16);
  void req
    .accept({
      privateData: pd,
      prepare: (ep) => {
        ep.busyPollMicros = busyPollMicros;
        ep.onReceive = (slice: Slice, length: number) => {
          // Small echoes go out by fi_inject (copied at once, no completion),
          // larger ones from the receive buffer itself, reposted once sent.
          if (length <= ep.info.injectSize) {
            ep.sendInline(slice.buffer.subarray(0, length));
            ep.postReceive(slice);
            return;
          }
          ep.send(slice.mr.slice(slice.offset, length)).then(
            () => ep.postReceive(slice),
            () => undefined,
          );
        };
        for (let i = 0; i < 256; i++) ep.postReceive(recvPool.slice(i * 4096, 4096));
      },
    })
    .then((ep) => endpoints.push(ep), () => undefined);
});

console.log(JSON.stringify({ port: listener.port }));
process.stdin.resume();
process.stdin.on('end', () => {
  domain.close().then(
    () => process.exit(0),
    (e: unknown) => {
      process.stderr.write(`transport-peer: closing failed: ${e instanceof Error ? e.message : String(e)}\n`);
      process.exit(1);
    },
  );
});
