// rblkd's lifecycle (docs/operations.md): config → volumes → TargetServer →
// listeners, then READY=1; SIGHUP applies a new config whole or not at all;
// SIGTERM drains and flushes. The front ends (target/rblk/, target/iscsi/)
// do the protocol; this file only decides what is served, and tells systemd
// how it is going.
import { ConfigError, formatIssue } from '../../config/config-error.js';
import { loadConfig } from '../../config/loader.js';
import type { Config, ListenerConfig, MetricsConfig } from '../../config/schema.js';
import { Reactors } from '../../native/reactors.js';
import { frontEndOf, listenerName } from '../front-end/registry.js';
import { TargetPortGroups } from '../scsi/index.js';
import { TargetServer } from '../server.js';
import { rblkConnections } from '../rblk/connection.js';
import { FabricTargetTransport } from '../transport/fabric-transport.js';
import type { TargetPort, TargetTransport } from '../transport/transport.js';
import { ControlServer, ControlSocketTaken } from './control-server.js';
import { ListenError } from './listen-error.js';
import { openMetrics, sameMetrics, type MetricsServer, type MetricsSource } from './metrics.js';
import { errorText } from '../error-text.js';
import { reconfigureLogger, type DaemonLogger } from './logger.js';
import { monotonicUsec, startWatchdog, systemdNotifier, type Notifier } from './notify.js';
import { quiesce } from './quiesce.js';
import { emptyResult, inUseText, inUseWho, plural, type ReloadResult, type VolumeInUse } from './reload-result.js';
import { listenerKey, planReload, type ReloadPlan } from './reload-plan.js';
import { snapshotHandlers } from './snapshot-control.js';
import { serverOptions, startReactors } from './server-options.js';
import { recordLuns } from './record-luns.js';
import { ServedVolume, type VolumeContext } from './volumes.js';

/** How often a fenced volume's recovery looks whether the LU has gone idle, and retries a store that is away. */
const RECOVER_POLL_MS = 50;
const RECOVER_RETRY_MS = 5000;
const sleep = (ms: number): Promise<void> =>
  new Promise((resolve) => {
    setTimeout(resolve, ms).unref();
  });

export interface DaemonOptions {
  /** The file SIGHUP re-reads. */
  configPath: string;
  /** --state-dir: replaces state_dir on every (re)load. */
  stateDir?: string;
  log: DaemonLogger;
  notifier?: Notifier;
  transport?: TargetTransport;
  /** The package version, for `rblkd ctl status`. */
  version?: string;
}

/** A bound listener's name in `rblkd ctl`, the metrics' `listener` label and log lines: `tcp:10.0.0.1:7471`. */
function portName(p: TargetPort): string {
  return `${p.provider}:${p.address}:${p.port}`;
}

/** The same name for a listener that is not bound: its configured port. */
function configuredName(l: ListenerConfig): string {
  return listenerName(l, ':');
}

export class Daemon {
  private config: Config;
  private readonly server: TargetServer;
  /** Reactor threads for fast-path connections, fixed for the daemon's life (docs/target.md "Reactors"). */
  private readonly reactors: Reactors | null;
  private readonly volumes = new Map<string, ServedVolume>();
  /** Removed volumes whose in-flight commands are still finishing. */
  private readonly retiring = new Set<Promise<void>>();
  private readonly ports = new Map<string, TargetPort>();
  private readonly transport: TargetTransport;
  private readonly notifier: Notifier;
  private readonly log: DaemonLogger;
  private stopWatchdog: () => void = () => undefined;
  private reloadChain: Promise<unknown> = Promise.resolve();
  /** The reload waiting behind the running one, which later requests of the same force join. */
  private queuedReload: { force: boolean; run: Promise<ReloadResult> } | null = null;
  private stopping: Promise<number> | null = null;
  private skipDrain: (() => void) | null = null;
  private control: ControlServer | null = null;
  private metrics: MetricsServer | null = null;
  private readonly startedAt = new Date();
  /** Uptime is counted on the monotonic clock: a wall-clock step (NTP, `date -s`) does not change it. */
  private readonly startedMono = performance.now();
  /** For rblk_config_last_reload_*: the start counts as a load that applied (docs/operations.md "Metrics"). */
  // eslint-disable-next-line no-restricted-properties -- a wall-clock time, as the metric's name says
  private lastReload = { successful: true, successTimestamp: Date.now() / 1000 };
  /** This gateway's target port groups (ALUA), shared by every logical unit; undefined without `alua`. */
  private readonly portGroups: TargetPortGroups | undefined;

  private constructor(
    config: Config,
    private readonly opts: DaemonOptions,
  ) {
    this.config = config;
    this.log = opts.log;
    this.notifier = opts.notifier ?? systemdNotifier(opts.log);
    this.transport = opts.transport ?? new FabricTargetTransport();
    this.reactors = startReactors(config, opts.log);
    this.server = new TargetServer(serverOptions(config, opts.log, this.reactors), rblkConnections);
    this.portGroups = config.alua ? new TargetPortGroups(config.alua) : undefined;
  }

  /**
   * Opens every volume and binds every listener, then reports READY=1. On any
   * failure what was opened is closed again and the error is thrown.
   */
  static async start(config: Config, opts: DaemonOptions): Promise<Daemon> {
    const d = new Daemon(config, opts);
    for (const w of config.warnings) d.log.warn(formatIssue(config.source, w, 'warning'));
    try {
      await recordLuns(config, d.log);
      for (const v of config.volumes) {
        const sv = await ServedVolume.open(v, d.volumeContext(config));
        d.volumes.set(v.name, sv);
        d.server.addVolume(sv);
        d.watchFence(sv);
        d.log.info(`serving volume ${sv.describe()}`, { volume: sv.name, lun: sv.lun });
      }
      for (const l of config.listeners) await d.listen(l, config.source);
      await d.openControl(config);
      if (config.metrics) d.metrics = await openMetrics(config.metrics, config.source, d.metricsSource(), d.log);
    } catch (e) {
      await d.control?.close().catch(() => undefined);
      await d.server.close().catch(() => undefined);
      d.reactors?.close();
      for (const v of d.volumes.values()) await v.close().catch(() => null);
      throw e;
    }
    d.stopWatchdog = startWatchdog(d.notifier);
    d.notifier.send({ READY: 1, STATUS: d.status() });
    if (d.reactors) d.log.info(`reactors: ${plural(d.reactors.size, 'thread')} serve the fast path's connections (reactors: ${String(config.reactors)})`);
    d.log.info(`rblkd ready: ${d.status()}`);
    return d;
  }

  /**
   * The control socket. A socket another rblkd answers on refuses the start
   * when the file names the path; at the default path (another daemon's, a
   * test's) this one serves without it and says so, as it does when it may
   * not create /run/rblk (run by hand, not as root).
   */
  private async openControl(config: Config): Promise<void> {
    const path = config.control.socket;
    if (path === null) return;
    try {
      this.control = await ControlServer.open(path, this.controlHandlers(), this.log);
    } catch (e) {
      if (config.control.explicit) throw new Error(`control socket ${path}: ${errorText(e)}`);
      const why = e instanceof ControlSocketTaken ? e.message : errorText(e);
      this.log.warn(`no control socket, rblkd ctl will not reach this daemon: ${why} (set control.socket to choose a path)`);
    }
  }

  private controlHandlers(): Parameters<typeof ControlServer.open>[1] {
    return {
      status: () => this.statusInfo(),
      sessions: () => [...this.server.sessions].map((s) => s.info()),
      volumes: () => this.volumesInfo(),
      kick: (id) => this.kick(id),
      reload: (force) => this.reload({ force }),
      ...snapshotHandlers({ served: (name) => this.served(name), volumes: () => this.volumes.values(), stopping: () => this.stopping !== null, log: this.log }),
    };
  }

  private served(name: string): ServedVolume {
    const sv = this.volumes.get(name);
    if (!sv) throw new Error(`no volume ${name} (rblkd ctl volumes lists them)`);
    return sv;
  }

  private metricsSource(): MetricsSource {
    return {
      volumes: () => [...this.volumes.values()].map((v) => ({ name: v.name, size: v.backend.size, stats: v.lu.stats, qos: v.lu.qos, space: v.space })),
      listeners: () => this.listenersInfo().map((l) => ({ name: l.name, sessions: l.sessions, connections: l.connections, pool: l.pool })),
      build: () => ({ version: this.opts.version ?? 'unknown', node_version: process.version }),
      lastReload: () => this.lastReload,
    };
  }

  private listenersInfo(): { name: string; provider: string; address: string; port: number; sessions: number; connections: number; pool: ReturnType<NonNullable<TargetPort['poolUse']>> }[] {
    // Logged in and serving, in each protocol's own terms (ServedConnection.isActive): the
    // state names differ (rblk's `active`, iSCSI's `full`, NVMe's `admin queue` and `I/O queue N`).
    const infos = [...this.server.sessions].map((s) => ({ port: s.info().port, active: s.isActive }));
    return [...this.ports.values()].map((p) => {
      const name = portName(p);
      const mine = infos.filter((i) => i.port === name);
      return {
        name,
        provider: p.provider,
        address: p.address,
        port: p.port,
        sessions: mine.filter((i) => i.active).length,
        connections: mine.length,
        pool: p.poolUse?.() ?? [],
      };
    });
  }

  /** `rblkd ctl status`. */
  statusInfo(): Record<string, unknown> {
    return {
      version: this.opts.version ?? 'unknown',
      pid: process.pid,
      since: this.startedAt.toISOString(),
      uptimeSeconds: Math.floor((performance.now() - this.startedMono) / 1000),
      config: this.opts.configPath,
      targetName: this.config.targetName,
      state: this.stopping ? 'stopping' : 'serving',
      status: this.status(),
      listeners: this.listenersInfo(),
      volumes: this.volumes.size,
      sessions: [...this.server.sessions].filter((s) => s.isActive).length,
      control: this.control?.path ?? null,
      metrics: this.metrics ? { address: this.metrics.address, port: this.metrics.port } : null,
      logging: this.config.logging,
      // Native threads serving fast-path connections, and how many each holds now (docs/operations.md "reactors").
      reactors: { setting: this.config.reactors, threads: this.reactors?.stats.map((r) => r.connections) ?? [] },
      // This gateway's target port group (docs/operations.md "Several gateways"), or null without alua.
      alua: this.portGroups ? { group: this.portGroups.local.group, state: this.portGroups.local.state, peers: this.portGroups.peers.map((p) => ({ group: p.group, state: p.state })) } : null,
    };
  }

  /** `rblkd ctl volumes`. */
  volumesInfo(): Record<string, unknown>[] {
    return [...this.volumes.values()].map((v) => {
      const b = v.backend as { ioEngine?: string; ioEngineFallback?: string | null };
      const c = v.config;
      return {
        name: v.name,
        lun: v.lun,
        size: v.backend.size,
        blockSize: c.blockSize,
        backend: c.backing.kind,
        path: 'path' in c.backing ? c.backing.path : c.backing.kind === 'rbd' ? `${c.backing.pool}/${c.backing.image}` : null,
        engine: b.ioEngine ?? null,
        readOnly: v.lu.readOnly,
        thin: v.lu.thin,
        space: v.space,
        counters: v.lu.stats.byClass(),
        // docs/operations.md "QoS limits": the limits in force, what waited for them, and the rates now.
        qos: { ...v.lu.qos.report(), rates: v.rates.rates() },
      };
    });
  }

  /**
   * `rblkd ctl kick`: logs the session out (T_LOGOUT, administrative) and
   * disconnects it. The initiator sees a lost connection: rblk's reconnects.
   */
  async kick(id: string): Promise<Record<string, unknown>> {
    const s = this.server.session(id);
    if (!s) throw new Error(`no session ${id} (rblkd ctl sessions lists them)`);
    const info = s.info();
    // The fields every session line has (docs/operations.md "Logs and the journal"); `session` is a
    // number, so a connection not logged in yet (id c<N>) has only its connection number.
    this.log.warn(`session ${id} kicked by the administrator (rblkd ctl kick)`, {
      ...(/^\d+$/.test(id) ? { session: Number(id) } : {}),
      initiator: info.initiator ?? undefined,
      peer: info.peer,
      connection: info.connection,
    });
    await s.logout('admin', 'kicked by the administrator (rblkd ctl kick)');
    return { kicked: id, initiator: info.initiator, peer: info.peer };
  }

  private volumeContext(config: Config): VolumeContext {
    return { stateDir: config.stateDir, maxIo: config.limits.maxIo, log: this.log, portGroups: this.portGroups };
  }

  private async listen(l: ListenerConfig, source: string): Promise<void> {
    let port: TargetPort;
    try {
      port = await frontEndOf(l.protocol).listen(l, { server: this.server, transport: this.transport });
    } catch (e) {
      throw new ListenError(l, source, e);
    }
    this.ports.set(listenerKey(l), port);
    // Tests parse this line for the port that `port: 0` picked.
    // `listener` is the name `rblkd ctl` and the metrics give it (provider:address:bound port).
    this.log.info(`listening ${port.provider} ${port.address}:${port.port}`, { listener: portName(port) });
  }

  /** STATUS= text, and the ready line: what is served where. */
  status(): string {
    const where = [...this.ports.values()].map((p) => `${p.provider} ${p.address}:${p.port}`).join(', ');
    return `serving ${plural(this.volumes.size, 'volume')} on ${where || 'no listener'}`;
  }

  get currentConfig(): Config {
    return this.config;
  }

  /**
   * SIGHUP and `rblkd ctl reload`. Reloads run one at a time; requests
   * during one coalesce into one more, whose result they all get (a forced
   * request and an unforced one are not merged). Without force, removing a
   * volume that logged-in sessions can see is refused, naming them; SIGHUP
   * has no force (docs/operations.md "Removing a volume in use").
   */
  reload(opts: { force?: boolean } = {}): Promise<ReloadResult> {
    const force = opts.force === true;
    if (this.stopping) return Promise.resolve(emptyResult(false, ['rblkd is stopping']));
    if (this.queuedReload?.force === force) return this.queuedReload.run;
    const run = this.reloadChain.then(() => {
      if (this.queuedReload?.run === run) this.queuedReload = null;
      if (this.stopping) return emptyResult(false, ['rblkd is stopping']);
      return this.doReload(force).then(
        (r) => {
          const successful = r.applied && r.errors.length === 0;
          // eslint-disable-next-line no-restricted-properties -- a wall-clock time, as the metric's name says
          this.lastReload = { successful, successTimestamp: successful ? Date.now() / 1000 : this.lastReload.successTimestamp };
          return r;
        },
        (e: unknown) => {
          this.lastReload = { ...this.lastReload, successful: false };
          throw e;
        },
      );
    });
    this.queuedReload = { force, run };
    this.reloadChain = run.catch(() => undefined);
    return run;
  }

  private async doReload(force: boolean): Promise<ReloadResult> {
    // Type=notify-reload protocol (systemd ≥ 253): RELOADING=1 with the monotonic time, then READY=1.
    this.notifier.send({ RELOADING: 1, MONOTONIC_USEC: monotonicUsec().toString(), STATUS: 'reloading the configuration' });
    this.log.info(`reloading ${this.opts.configPath}`);
    let next: Config;
    try {
      next = loadConfig(this.opts.configPath, this.opts.stateDir !== undefined ? { stateDir: this.opts.stateDir } : {});
    } catch (e) {
      const lines = e instanceof ConfigError ? e.errors.map((i) => formatIssue(e.source, i)) : [errorText(e)];
      return this.refuse(`the file has ${plural(lines.length, 'error')}`, lines);
    }
    const plan = planReload(this.config, next);
    this.log.debug(
      `reload plan: add [${plan.added.map((v) => v.name).join(', ')}], remove [${plan.removed.map((v) => v.name).join(', ')}], keep [${plan.kept.map((k) => k.to.name).join(', ')}], ` +
        `listeners +[${plan.listenersAdded.map(listenerKey).join(', ')}] -[${plan.listenersRemoved.map(listenerKey).join(', ')}], ${plural(plan.refusals.length, 'refusal')}`,
    );
    if (plan.refusals.length > 0) return this.refuse(`${plural(plan.refusals.length, 'change')} cannot apply`, plan.refusals);
    const inUse = this.inUse(plan.removed);
    if (inUse.length > 0 && !force) {
      const refused = this.refuse(`${plural(inUse.length, 'volume')} to remove ${inUse.length === 1 ? 'is' : 'are'} in use`, inUse.map(inUseText));
      return { ...refused, inUse };
    }
    for (const w of next.warnings) this.log.warn(formatIssue(next.source, w, 'warning'));
    if (next.control.socket !== this.config.control.socket) {
      this.log.warn(`control.socket changed: the control socket stays at ${this.control?.path ?? '(none)'} until rblkd restarts`);
    }

    // Everything that can fail comes before anything is changed: the LUN record, new volumes, a moved metrics endpoint.
    try {
      await recordLuns(next, this.log);
    } catch (e) {
      return this.refuse('the LUNs could not be recorded', [errorText(e)]);
    }
    const opened: ServedVolume[] = [];
    try {
      for (const v of plan.added) opened.push(await ServedVolume.open(v, this.volumeContext(next)));
    } catch (e) {
      for (const v of opened) await v.close().catch(() => null);
      return this.refuse('a new volume could not be opened', [errorText(e)]);
    }
    let metrics: MetricsServer | null | undefined;
    if (!sameMetrics(this.config.metrics, next.metrics) && next.metrics) {
      try {
        metrics = await openMetrics(next.metrics, next.source, this.metricsSource(), this.log);
      } catch (e) {
        for (const v of opened) await v.close().catch(() => null);
        return this.refuse('the metrics endpoint could not move', [errorText(e)]);
      }
    } else if (!next.metrics) metrics = null;
    for (const u of inUse) this.log.warn(`reload --force: ${inUseWho(u)}; removing it under them`, { volume: u.volume, lun: u.lun });
    const result = await this.apply(next, plan, opened);
    result.inUse = inUse;
    if (metrics !== undefined && metrics !== this.metrics) {
      await this.metrics?.close();
      if (this.metrics && !metrics) this.log.info('metrics endpoint closed');
      this.metrics = metrics;
    }
    this.notifier.send({ READY: 1, STATUS: this.status() });
    return result;
  }

  /** Of the volumes a reload removes, those logged-in sessions can see, with those sessions. */
  private inUse(removed: readonly { name: string; lun: number }[]): VolumeInUse[] {
    return removed
      .map((v) => ({
        volume: v.name,
        lun: v.lun,
        sessions: this.server.usersOf(v.name).map((s) => {
          const i = s.info();
          return { id: i.id, initiator: i.initiator, peer: i.peer };
        }),
      }))
      .filter((u) => u.sessions.length > 0);
  }

  private refuse(summary: string, reasons: readonly string[]): ReloadResult {
    this.log.error(`reload refused, still serving the previous configuration: ${summary}`);
    for (const r of reasons) this.log.error(r);
    this.notifier.send({ READY: 1, STATUS: `reload failed (${summary}); ${this.status()}` });
    return emptyResult(false, [summary, ...reasons]);
  }

  private async apply(next: Config, plan: ReloadPlan, opened: ServedVolume[]): Promise<ReloadResult> {
    const result = emptyResult(true);
    result.added = plan.added.map((v) => v.name);
    result.removed = plan.removed.map((v) => v.name);
    result.changed = plan.kept.filter((k) => JSON.stringify(k.from) !== JSON.stringify(k.to)).map((k) => k.to.name);
    result.listenersAdded = plan.listenersAdded.map(listenerKey);
    result.listenersRemoved = plan.listenersRemoved.map(listenerKey);
    // Limits, secrets, auth and the target name apply to the next login.
    this.server.reconfigure(serverOptions(next, this.log, this.reactors));
    reconfigureLogger(this.log, next.logging);

    for (const { to } of plan.kept) this.volumes.get(to.name)?.reconfigure(to);
    // SPC-4 5.15.2.5: a changed access state is a unit attention for every nexus of every LU.
    const groupBefore = this.portGroups?.local.group;
    if (this.portGroups && next.alua && this.portGroups.update(next.alua)) {
      for (const sv of this.volumes.values()) sv.lu.raiseAccessStateChanged();
      this.log.info(`target port group ${next.alua.local.group} is ${next.alua.local.state}`);
    }
    for (const v of plan.removed) this.retire(v.name);
    for (const sv of opened) {
      this.volumes.set(sv.name, sv);
      this.server.addVolume(sv);
      this.watchFence(sv);
      this.log.info(`serving volume ${sv.describe()}`, { volume: sv.name, lun: sv.lun });
    }
    // A new group number: peers must find this gateway's client under it to fence it (docs/backends.md "Fencing another gateway").
    if (this.portGroups && this.portGroups.local.group !== groupBefore) {
      const group = this.portGroups.local.group;
      for (const sv of this.volumes.values()) {
        if (sv.backend.publishGateway === undefined) continue;
        try {
          await sv.backend.publishGateway(group);
        } catch (e) {
          this.log.error(`volume ${sv.name}: publishing this gateway as target port group ${group} failed, so no peer can fence it: ${e instanceof Error ? e.message : String(e)}`, { volume: sv.name, lun: sv.lun });
        }
      }
    }
    // SPC-5 6.2: every session rescans on REPORTED LUNS DATA HAS CHANGED (3F/0E).
    if (plan.added.length > 0 || plan.removed.length > 0) this.server.inventoryChanged();

    for (const { to } of plan.kept) {
      const sv = this.volumes.get(to.name);
      if (!sv) continue;
      try {
        const grown = await sv.grow();
        if (grown) result.resized.push(sv.name);
        if (grown) this.log.info(`volume ${sv.name} resized from ${grown.from} to ${grown.to} bytes`, { volume: sv.name, lun: sv.lun });
      } catch (e) {
        this.log.error(`volume ${sv.name} could not be resized: ${errorText(e)}`, { volume: sv.name });
        result.errors.push(`volume ${sv.name} could not be resized: ${errorText(e)}`);
      }
    }

    for (const l of plan.listenersRemoved) {
      const key = listenerKey(l);
      const port = this.ports.get(key);
      this.ports.delete(key);
      // Established sessions stay; the port closes with the server at stop.
      await port?.stopAccepting();
      this.log.info(`stopped listening on ${key}`, { listener: port ? portName(port) : configuredName(l) });
    }
    for (const l of plan.listenersAdded) {
      try {
        await this.listen(l, next.source);
      } catch (e) {
        this.log.error(errorText(e), { listener: configuredName(l) });
        result.errors.push(errorText(e));
      }
    }
    this.config = next;
    const changes = [
      plan.added.length > 0 ? `added ${plan.added.map((v) => v.name).join(', ')}` : '',
      plan.removed.length > 0 ? `removed ${plan.removed.map((v) => v.name).join(', ')}` : '',
    ].filter((s) => s !== '');
    this.log.info(`reloaded${changes.length > 0 ? ` (${changes.join('; ')})` : ''}: ${this.status()}`);
    return result;
  }

  /**
   * A store that fences this gateway out (an RBD gateway the cluster
   * blocklisted, docs/backends.md "A fenced gateway comes back") is served
   * again through a new client, once nothing sent before the fence can reach
   * it: every connection that may use the volume is ended (its commands
   * settle; any of them not yet at the backend is refused), then the LU's
   * range lock goes idle (commands and native requests of those connections
   * still inside the old client hold ranges there until they come back), then
   * the backend makes its client anew. Retried every RECOVER_RETRY_MS while
   * the cluster is away; given up when the volume is removed or rblkd stops.
   */
  private watchFence(sv: ServedVolume): void {
    const backend = sv.backend;
    if (backend.onFenced === undefined || backend.recover === undefined) return;
    let running: Promise<void> | null = null;
    backend.onFenced(() => {
      running ??= this.recoverVolume(sv)
        .catch((e: unknown) => void this.log.error(`volume ${sv.name}: serving it again failed: ${errorText(e)}`, { volume: sv.name, lun: sv.lun }))
        .finally(() => (running = null));
    });
  }

  private async recoverVolume(sv: ServedVolume): Promise<void> {
    const meta = { volume: sv.name, lun: sv.lun };
    const serving = (): boolean => this.volumes.get(sv.name) === sv && this.stopping === null;
    const ended = await this.server.endConnectionsOf(sv.name, `volume ${sv.name} was fenced out of its store`);
    this.log.warn(`volume ${sv.name}: fenced out of its store; ended the ${ended} connection(s) that could use it, so that nothing they sent before the fence runs later`, meta);
    const lock = sv.lu.rangeLock;
    while ((lock.activeCount > 0 || lock.waitingCount > 0) && serving()) await sleep(RECOVER_POLL_MS);
    for (let attempt = 0; serving(); attempt++) {
      try {
        const address = await sv.backend.recover!();
        if (!sv.backend.fenced) {
          this.log.warn(`volume ${sv.name}: serving again${address === '' ? '' : `, as a new client of the store (${address})`}`, meta);
          return;
        }
      } catch (e) {
        if (!serving()) return;
        if (attempt === 0) this.log.error(`volume ${sv.name}: cannot serve it again yet (${errorText(e)}); retrying every ${RECOVER_RETRY_MS / 1000} s`, meta);
      }
      await sleep(RECOVER_RETRY_MS);
    }
  }

  /**
   * Unexports a volume at once, and closes its backend once the commands that
   * had already started on it are done (bounded by drain_timeout_ms).
   */
  private retire(name: string): void {
    const sv = this.volumes.get(name);
    if (!sv) return;
    this.volumes.delete(name);
    // Snapshot before any session's LUN map is refreshed: settled() counts the
    // commands outstanding on the LUN now, whichever session sent them.
    const users = [...this.server.sessions];
    this.server.removeVolume(name);
    this.log.info(`removing volume ${sv.describe()}`, { volume: sv.name, lun: sv.lun });
    const done = (async () => {
      const idle = await quiesce(users, sv.lun, this.config.limits.drainTimeoutMs);
      if (!idle) this.log.warn(`volume ${name}: commands still running after ${this.config.limits.drainTimeoutMs} ms; closing it anyway`, { volume: name });
      const failure = await sv.close();
      if (failure) this.log.error(`volume ${name}: flush or close failed: ${failure.message}`, { volume: name });
      else this.log.info(`volume ${name} closed`, { volume: name });
    })().catch((e: unknown) => {
      this.log.error(`volume ${name}: retiring it failed: ${errorText(e)}`, { volume: name });
    });
    this.retiring.add(done);
    void done.finally(() => this.retiring.delete(done));
  }

  /**
   * SIGTERM (docs/operations.md "Stopping and draining"): no new logins or
   * commands, running commands finish for up to drain_timeout_ms, sessions are
   * logged out, every volume is flushed and closed. force (a second signal)
   * stops waiting for the drain. Resolves with the exit status: 0, or 1 when
   * a flush failed (acknowledged writes may not be durable).
   */
  stop(force = false): Promise<number> {
    if (this.stopping) {
      if (force) this.skipDrain?.();
      return this.stopping;
    }
    this.stopping = this.doStop();
    return this.stopping;
  }

  private async doStop(): Promise<number> {
    const timeout = this.config.limits.drainTimeoutMs;
    this.notifier.send({ STOPPING: 1, STATUS: 'draining' });
    this.log.info(`stopping: draining ${plural(this.server.sessions.size, 'session')} (up to ${timeout} ms)`);
    await this.reloadChain;
    const skipped = new Promise<'skipped'>((resolve) => (this.skipDrain = () => resolve('skipped')));
    const outcome = await Promise.race([this.server.drain(timeout).then(() => 'drained' as const), skipped]);
    if (outcome === 'skipped') this.log.warn('second stop signal: not waiting for the drain');
    await this.server.close();
    this.reactors?.close();
    await Promise.all([...this.retiring]);
    let status = 0;
    for (const sv of this.volumes.values()) {
      const failure = await sv.close();
      if (failure) {
        status = 1;
        this.log.error(`volume ${sv.name}: flush or close failed at stop: ${failure.message}`, { volume: sv.name });
      }
    }
    this.volumes.clear();
    await this.metrics?.close();
    this.metrics = null;
    await this.control?.close();
    this.control = null;
    this.stopWatchdog();
    this.log.info(status === 0 ? 'stopped: every volume flushed and closed' : 'stopped with errors');
    return status;
  }
}
