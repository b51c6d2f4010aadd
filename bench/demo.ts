// `npm run demo`: the main job on one machine. For now (until the target and
// initiator land) it is the transport benchmark over libfabric's tcp provider
// on loopback, beside fi_pingpong.
import { runTransportBench, toMarkdown } from './transport.js';

const rows = await runTransportBench({ providers: ['tcp'], seconds: 1, pingpongIters: 10_000 });
console.log(toMarkdown(rows));
