/// <reference types="node" preserve="true" />
// The `rblk` package: an async block API over rblk's RDMA transport.
//
//   import { connect } from 'rblk';
//   const session = await connect('rblk://10.0.0.5/db?provider=verbs');
//   const vol = await session.open();
//   await vol.write(0, Buffer.alloc(4096, 1));
//   await session.close();
//
// docs/initiator.md describes the API, the error codes, and the exact timeout
// and recovery semantics. The reference above stays in the emitted
// index.d.ts (preserve): the declarations use Node's types (Buffer,
// AbortSignal, EventEmitter), so they bring @types/node themselves, and a
// project with no ambient types ("types": [], TypeScript 6's default) needs
// nothing more (docs/initiator.md).
import { NvmeSession, type NvmeConnectOptions } from './nvme/session.js';
import { isNvmeUrl } from './nvme/url.js';
import { resolveOptions, type ConnectOptions } from './options.js';
import { Session } from './session.js';

/** An NVMe/TCP URL: `nvme+tcp://host[:port][,host2[:port]]/<subsystem NQN>[?hostnqn=...&digest=header,data]`. */
export type NvmeTcpUrl = `nvme+tcp://${string}`;

/**
 * Connects to a target and logs in every connection of a new session.
 *
 * `target` is an rblk URL, `rblk://host[:port][/volume][?provider=tcp&initiator=NAME&target=NAME]`,
 * or the options themselves; `options` adds to (and overrides) the URL. The
 * secret never goes in a URL: pass `secret`, `secretFile` (mode 0600 or
 * stricter) or set RBLK_SECRET.
 *
 * Rejects with RblkError 'LOGIN_FAILED' (cannot connect, or refused) or
 * 'AUTH_FAILED' (authentication failed either way); the first login is not
 * retried. Option mistakes throw RangeError.
 */
export async function connect(target: NvmeTcpUrl, options?: NvmeConnectOptions): Promise<NvmeSession>;
export async function connect(target: string | ConnectOptions, options?: Partial<ConnectOptions>): Promise<Session>;
/**
 * With an `nvme+tcp://` URL, connects as an NVMe/TCP host instead and
 * resolves an NvmeSession (docs/nvme.md "The rblk library as an NVMe/TCP
 * host"); a caller whose URL is a plain `string` at compile time gets the
 * Session type, so it should call connectNvme() for NVMe URLs.
 */
export async function connect(target: string | ConnectOptions, options: Partial<ConnectOptions> | NvmeConnectOptions = {}): Promise<Session | NvmeSession> {
  if (typeof target === 'string' && isNvmeUrl(target)) return NvmeSession.open(target, options as NvmeConnectOptions);
  return Session.open(resolveOptions(target, options as Partial<ConnectOptions>));
}

/** Connects as an NVMe/TCP host to the subsystem an `nvme+tcp://` URL names. */
export async function connectNvme(url: string, options: NvmeConnectOptions = {}): Promise<NvmeSession> {
  return NvmeSession.open(url, options);
}

export { NvmeSession, NVME_DEFAULTS, type NvmeConnectOptions, type NvmePathInfo, type NvmeSessionEvents } from './nvme/session.js';
export { NvmeVolume, type NvmeIoOptions, type NvmeWriteOptions } from './nvme/volume.js';
export { NvmeReservations, type NvmeRegistrant, type NvmeReservationStatus } from './nvme/reservations.js';
export { parseNvmeUrl, isNvmeUrl, NVME_TCP_PORT, type NvmeUrl } from './nvme/url.js';
export { Session, type ConnectionInfo, type SessionEvents, type SessionState } from './session.js';
export { Volume, type IoOptions, type VolumeEvents, type WriteOptions, type WriteZeroesOptions } from './volume.js';
export { AbortError } from './abort.js';
export { Reservations, ReservationType, type ReadKeys, type ReadReservation, type ReservationTypeCode } from './reservations.js';
export { RegisteredBuffer } from './registered-buffer.js';
export { MiscompareError, RblkError, hasCode, type RblkErrorCode } from './errors.js';
export { DEFAULTS, defaultInitiatorName, SecretValue, type ConnectOptions, type ReconnectOptions, type ResolvedOptions, type TimeoutOptions } from './options.js';
export { DEFAULT_PORT, parseRblkUrl, type RblkUrl } from './url.js';
export type { RecoveryEvent } from './channel.js';
export type { VolumeInfo } from './discovery.js';
export type { ScsiRequest, ScsiResponse, DataIn, DataOut } from './scsi-request.js';
export type { AllocationExtent, BlockDevice, BlockDeviceInfo, BlockErrorCode } from './block-device.js';
export type { Sense } from '../protocol/scsi/sense.js';
export { DEFAULT_TARGET_NAME } from '../protocol/wire/index.js';
export { LoopInitiatorTransport } from './transport/loop-transport.js';
export type { InitiatorTransport } from './transport/transport.js';
// The native addons load on first use (docs/architecture.md "Loading the
// addon"); these say what is missing and let an application ask first.
export { FeatureUnavailableError, NativeLoadError, nativeFeatures, type NativeFeature } from '../native/binding.js';
