// The optional Prometheus endpoint (docs/operations.md "Metrics"): GET
// /metrics on `metrics.address:metrics.port` (loopback, 9471 by default; off
// unless the config has a `metrics` section), in the Prometheus text format,
// through prom-client. prom-client is imported only when the endpoint is
// configured. Nothing is counted here: every value is read at scrape time
// from the counters the request core keeps (scsi/request/io-stats.ts), the
// sessions and the ports, so a scrape costs the data path nothing.
import type { SpaceInfo } from './space-watch.js';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { MetricsConfig } from '../../config/schema.js';
import { IO_CLASSES, LATENCY_BUCKETS_S, type IoStats } from '../scsi/index.js';
import type { VolumeQos } from '../scsi/qos.js';
import type { PoolUse } from '../transport/transport.js';
import { errorText } from '../error-text.js';
import { type DaemonLogger } from './logger.js';

/** What the endpoint reads at each scrape. */
export interface MetricsSource {
  /** space: a file volume's space thresholds' last reading (space-watch.ts), else null. */
  volumes(): readonly { name: string; size: number; stats: IoStats; qos?: VolumeQos; space?: SpaceInfo | null }[];
  listeners(): readonly { name: string; sessions: number; connections: number; pool: readonly PoolUse[] }[];
  /** The labels of rblk_build_info: the package's version and Node's. */
  build(): { version: string; node_version: string };
  /** The last configuration load (the start, or a reload): whether it applied whole, and when one last did (seconds since the epoch). */
  lastReload(): { successful: boolean; successTimestamp: number };
}

/**
 * prom-client's default metrics that `promtool check metrics` rejects: gauges
 * named like counters (`_total`). Each is the sum over the `type` label of the
 * gauge of the same name without `_total`, which stays (docs/operations.md "Metrics").
 */
export const DROPPED_DEFAULT_METRICS = ['nodejs_active_handles_total', 'nodejs_active_requests_total', 'nodejs_active_resources_total'] as const;

type Labels = Record<string, string | number>;
interface Sample {
  labels: Labels;
  value: number;
  metricName?: string;
}

/** A metric as prom-client's Registry formats it: read whole at each scrape. */
interface Collected {
  name: string;
  help: string;
  type: 'counter' | 'gauge' | 'histogram';
  aggregator: 'sum';
  get(): Promise<{ name: string; help: string; type: string; values: Sample[]; aggregator: 'sum' }>;
}

function metric(name: string, help: string, type: Collected['type'], values: () => Sample[]): Collected {
  return {
    name,
    help,
    type,
    aggregator: 'sum',
    get: () => Promise.resolve({ name, help, type, values: values(), aggregator: 'sum' }),
  };
}

/** Every rblk metric, by name: the table docs/operations.md "Metrics" lists. */
export function rblkMetrics(src: MetricsSource): Collected[] {
  const perClass = (pick: (s: IoStats, i: number) => number): Sample[] =>
    src.volumes().flatMap((v) => IO_CLASSES.map((cls, i) => ({ labels: { volume: v.name, op: cls }, value: pick(v.stats, i) })));
  return [
    metric('rblk_volume_operations_total', 'Commands completed, by volume and class (read, write, discard, flush, other).', 'counter', () =>
      perClass((s, i) => s.classes[i]!.ops),
    ),
    metric('rblk_volume_bytes_total', 'Bytes moved to (read) or from (write) initiators, by volume and class.', 'counter', () => perClass((s, i) => s.classes[i]!.bytes)),
    metric('rblk_volume_errors_total', 'Commands that did not end GOOD (CHECK CONDITION, BUSY, TASK ABORTED, failed transfers), by volume and class.', 'counter', () =>
      perClass((s, i) => s.classes[i]!.errors),
    ),
    metric('rblk_volume_latency_seconds', 'Time from a command arriving to its response, by volume and class.', 'histogram', () =>
      src.volumes().flatMap((v) =>
        IO_CLASSES.flatMap((cls, i) => {
          const c = v.stats.classes[i]!;
          const cum = c.cumulative();
          const labels = { volume: v.name, op: cls };
          return [
            ...LATENCY_BUCKETS_S.map((le, b) => ({ labels: { ...labels, le }, value: cum[b]!, metricName: 'rblk_volume_latency_seconds_bucket' })),
            { labels: { ...labels, le: '+Inf' }, value: cum[cum.length - 1]!, metricName: 'rblk_volume_latency_seconds_bucket' },
            { labels, value: c.seconds, metricName: 'rblk_volume_latency_seconds_sum' },
            { labels, value: c.ops, metricName: 'rblk_volume_latency_seconds_count' },
          ];
        }),
      ),
    ),
    metric('rblk_volume_qos_throttled_seconds_total', 'Time READs and WRITEs waited for their QoS limits (docs/operations.md "QoS limits"), summed over commands, by volume.', 'counter', () =>
      src.volumes().map((v) => ({ labels: { volume: v.name }, value: v.qos?.throttledSeconds ?? 0 })),
    ),
    metric('rblk_volume_qos_throttled_operations_total', 'READs and WRITEs that waited for their QoS limits, by volume.', 'counter', () =>
      src.volumes().map((v) => ({ labels: { volume: v.name }, value: v.qos?.throttledCommands ?? 0 })),
    ),
    metric('rblk_volume_qos_limit', 'QoS limits in force, by volume and limit (iops, read_iops, write_iops: commands per second; bps, read_bps, write_bps: bytes per second); absent: none.', 'gauge', () =>
      src.volumes().flatMap((v) => Object.entries(v.qos?.report().limits ?? {}).map(([limit, value]) => ({ labels: { volume: v.name, limit }, value }))),
    ),
    metric('rblk_volume_size_bytes', 'Capacity of each served volume.', 'gauge', () => src.volumes().map((v) => ({ labels: { volume: v.name }, value: v.size }))),
    // docs/operations.md "Space thresholds": file volumes only.
    metric('rblk_volume_space_low', '1 while a file volume is over one of its space thresholds (38/07 was raised), else 0.', 'gauge', () =>
      src.volumes().flatMap((v) => (v.space ? [{ labels: { volume: v.name }, value: v.space.low ? 1 : 0 }] : [])),
    ),
    metric('rblk_volume_allocated_bytes', "Bytes a file volume's file has allocated on its filesystem.", 'gauge', () =>
      src.volumes().flatMap((v) => (v.space ? [{ labels: { volume: v.name }, value: v.space.allocatedBytes }] : [])),
    ),
    metric('rblk_volume_filesystem_free_bytes', "Bytes free to rblkd on a file volume's filesystem.", 'gauge', () =>
      src.volumes().flatMap((v) => (v.space ? [{ labels: { volume: v.name }, value: v.space.filesystemFreeBytes }] : [])),
    ),
    metric('rblk_listener_sessions', 'Logged-in sessions on each listener.', 'gauge', () =>
      src.listeners().map((l) => ({ labels: { listener: l.name }, value: l.sessions })),
    ),
    metric('rblk_listener_connections', 'Connections on each listener, logged in or not yet.', 'gauge', () =>
      src.listeners().map((l) => ({ labels: { listener: l.name }, value: l.connections })),
    ),
    metric('rblk_pool_chunks', "Chunks in each listener's registered data pool, by chunk size.", 'gauge', () =>
      src.listeners().flatMap((l) => l.pool.map((p) => ({ labels: { listener: l.name, chunk_bytes: p.chunkSize }, value: p.chunks }))),
    ),
    metric('rblk_build_info', 'Always 1; the labels say which rblkd this is: the package version and node_version.', 'gauge', () => [
      { labels: src.build(), value: 1 },
    ]),
    metric('rblk_config_last_reload_successful', 'Whether the last configuration load (the start, SIGHUP or rblkd ctl reload) applied whole: 1, or 0 when it was refused or partly failed.', 'gauge', () => [
      { labels: {}, value: src.lastReload().successful ? 1 : 0 },
    ]),
    metric('rblk_config_last_reload_success_timestamp_seconds', 'When a configuration load last applied whole (the start, or a reload), in seconds since the epoch.', 'gauge', () => [
      { labels: {}, value: src.lastReload().successTimestamp },
    ]),
    metric('rblk_pool_chunks_in_use', 'Chunks held by commands now, by listener and chunk size.', 'gauge', () =>
      src.listeners().flatMap((l) => l.pool.map((p) => ({ labels: { listener: l.name, chunk_bytes: p.chunkSize }, value: p.inUse }))),
    ),
  ];
}

export class MetricsServer {
  private constructor(
    private readonly server: Server,
    readonly config: MetricsConfig,
    readonly address: string,
    readonly port: number,
  ) {}

  /** Binds the endpoint; rejects with the bind's error (EADDRINUSE...). */
  static async open(config: MetricsConfig, src: MetricsSource, log: DaemonLogger): Promise<MetricsServer> {
    const prom = await import('prom-client');
    const registry = new prom.Registry();
    // process_* and nodejs_*: CPU, memory, fds, event-loop lag, GC; without the gauges named like counters.
    prom.collectDefaultMetrics({ register: registry });
    for (const name of DROPPED_DEFAULT_METRICS) registry.removeSingleMetric(name);
    for (const m of rblkMetrics(src)) registry.registerMetric(m as unknown as Parameters<typeof registry.registerMetric>[0]);
    const server = createServer((req, res) => {
      const path = (req.url ?? '/').split('?')[0];
      if (req.method !== 'GET' && req.method !== 'HEAD') {
        res.writeHead(405, { Allow: 'GET, HEAD' }).end();
        return;
      }
      if (path !== '/metrics') {
        res.writeHead(404, { 'Content-Type': 'text/plain' }).end('rblkd serves /metrics only\n');
        return;
      }
      registry.metrics().then(
        (text) => res.writeHead(200, { 'Content-Type': registry.contentType }).end(req.method === 'HEAD' ? undefined : text),
        (e: unknown) => {
          log.error(`metrics: collecting failed: ${e instanceof Error ? e.message : String(e)}`);
          res.writeHead(500).end();
        },
      );
    });
    server.on('clientError', (_e, socket) => socket.destroy());
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(config.port, config.address, () => {
        server.off('error', reject);
        resolve();
      });
    });
    server.on('error', (e) => log.error(`metrics endpoint: ${e.message}`));
    const bound = server.address() as AddressInfo;
    const ms = new MetricsServer(server, config, bound.address, bound.port);
    // Tests parse this line for the port that `port: 0` picked.
    log.info(`metrics on http://${bound.family === 'IPv6' ? `[${bound.address}]` : bound.address}:${bound.port}/metrics`);
    return ms;
  }

  close(): Promise<void> {
    return new Promise((resolve) => {
      this.server.close(() => resolve());
      this.server.closeAllConnections();
    });
  }
}

/** Whether a reload keeps the metrics endpoint where it is. */
export function sameMetrics(a: MetricsConfig | null, b: MetricsConfig | null): boolean {
  return a === b || (a !== null && b !== null && a.address === b.address && a.port === b.port);
}

/**
 * The metrics endpoint, or an error that names it, its address and the file, as a listener's
 * does (docs/operations.md "Troubleshooting"): Node's own says only `listen EADDRINUSE`.
 */
export async function openMetrics(metrics: MetricsConfig, source: string, src: MetricsSource, log: DaemonLogger): Promise<MetricsServer> {
  try {
    return await MetricsServer.open(metrics, src, log);
  } catch (e) {
    const c = e as NodeJS.ErrnoException;
    const why = c.code === 'EADDRINUSE' ? 'the port is in use (EADDRINUSE)' : c.code === 'EADDRNOTAVAIL' ? 'the address is not one of this host (EADDRNOTAVAIL)' : errorText(e);
    throw Object.assign(new Error(`cannot serve metrics on ${metrics.address}:${metrics.port} (${source}, metrics): ${why}`, { cause: e }), { code: c.code });
  }
}
