// How the rblk front end opens a port on a TargetTransport (libfabric, or the
// loop in tests) and admits connections to it: the connection request's
// queue depth and capsule size against the limits, the receive ring that
// fits limits.connection_memory, the pre-login limits (the server's, through
// PortHost), then one served connection per accepted endpoint. TargetServer
// calls it through TargetServer.listen (rblkConnections in connection.ts).
import { ConnectRejectReason, CONTROL_RECV_BUFFERS, MAX_CAPSULE_SIZE, MIN_CAPSULE_SIZE, type ConnectRequestData } from '../../protocol/wire/index.js';
import type { ConnectionEnvironment, ConnectionFactory } from '../connection/environment.js';
import { sourceOf } from '../peer-source.js';
import type { ListenOptions, PortHost } from '../server.js';
import type { DataBuffer, TargetConnection, TargetPort } from '../transport/transport.js';

const DEFAULT_MAX_CAPSULE = 8192 + 48;
/**
 * Receive buffers posted before login: the LOGIN_REQ, then the LOGIN_AUTH
 * (docs/protocol.md §4, §7); each is reposted once handled. The rest of the
 * ring is posted at login (docs/operations.md, "Connection limits").
 */
const LOGIN_RECV_BUFFERS = 2;

/** Listens on `o.transport` and serves each connection it accepts with `serve`. */
export async function listenRblk(host: PortHost, o: ListenOptions, serve: ConnectionFactory): Promise<TargetPort> {
  const limits = host.options.limits;
  const maxCapsule = Math.min(MAX_CAPSULE_SIZE, Math.max(MIN_CAPSULE_SIZE, limits.maxCapsule ?? Math.max(DEFAULT_MAX_CAPSULE, limits.inCapsuleData + 48)));
  /** Each admitted request's source, until its accept finishes or is abandoned. */
  const requestSource = new WeakMap<ConnectRequestData, string>();
  let env: ConnectionEnvironment | null = null;
  const port = await o.transport.listen(
    {
      provider: o.provider,
      address: o.address,
      port: o.port,
      maxIo: limits.maxIo,
      dataBuffers: limits.dataBuffers ?? 64,
      protocolVersion: host.options.protocolVersion,
      // One clock from TCP accept to LOGIN_RSP: the fabric connection request must come within it too.
      connectTimeoutMs: limits.loginTimeoutMs,
      reactors: host.options.reactors ?? null,
      busyPollMicros: () => host.options.busyPollMicros ?? 0,
    },
    {
      admit: (request, peer) => {
        if (host.draining) return { reject: ConnectRejectReason.SHUTTING_DOWN };
        host.options.log.debug(`connection request on ${env?.portName ?? o.provider}: queue depth ${request.queueDepth}, capsule ${request.maxCapsule}`, { peer });
        const l = host.options.limits;
        const source = sourceOf(peer);
        const refusal = host.preLoginRefusal(source);
        if (refusal !== null) {
          host.refusals.note(`connection from ${source} refused: ${refusal}`);
          return { reject: ConnectRejectReason.NO_RESOURCES };
        }
        const capsule = Math.min(request.maxCapsule, maxCapsule);
        // limits.connection_memory bounds the ring a session may register: credits + control buffers.
        const fit = l.connectionMemory === undefined ? Infinity : Math.floor(l.connectionMemory / capsule) - CONTROL_RECV_BUFFERS;
        const depth = Math.min(request.queueDepth, l.queueDepth, fit);
        if (depth < 1) return { reject: ConnectRejectReason.NO_RESOURCES };
        host.accepting(source, 1);
        requestSource.set(request, source);
        const recvBuffers = depth + CONTROL_RECV_BUFFERS;
        return { accept: { recvBuffers, maxCapsule: capsule, loginBuffers: Math.min(LOGIN_RECV_BUFFERS, recvBuffers) } };
      },
      connected: <B extends DataBuffer>(conn: TargetConnection<B>) => {
        host.accepting(sourceOf(conn.peer), -1);
        host.options.log.debug(`accepted a connection on ${env?.portName ?? o.provider}`, { connection: conn.id, peer: conn.peer, provider: conn.provider });
        host.adopt(serve(conn, env!));
      },
      acceptFailed: (e: Error) => host.acceptFailed(env?.portName ?? `${o.provider}:${o.address}:${o.port}`, e),
      acceptAbandoned: (request) => {
        host.accepting(requestSource.get(request) ?? '', -1);
        host.released();
      },
      staleClosed: (n) => {
        host.released();
        host.reaped.note(`closed ${n} connection(s) that sent no connection request within ${host.options.limits.loginTimeoutMs} ms`);
      },
    },
  );
  env = host.environment(`${port.provider}:${port.address}:${port.port}`);
  return port;
}
