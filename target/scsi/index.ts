// The protocol-neutral SCSI core: what front ends and the daemon use.
export { LogicalUnit, naa6, parseIdentifier, type LogicalUnitOptions, type LuLimits } from './logical-unit.js';
export { initiatorNameOf, nexusKey, type Access, type Nexus } from './nexus.js';
export {
  backendFailure,
  parseCommand,
  ScsiCommand,
  type Completion,
  type ExecContext,
  type ParseResult,
} from './scsi-command.js';
export { ScsiTarget } from './scsi-target.js';
export { MemoryReservationStore, type PrListener, type ReservationStore } from './reservations/reservation-store.js';
export { SharedReservationStore } from './reservations/shared-reservation-store.js';
export type { PrState, Registrant, Reservation } from './reservations/pr-state.js';
export { FastPathGate, type FastPathBinding } from './fast-path-gate.js';
export type { Direction } from './command-spec.js';
export { COMMANDS } from './command-table.js';
export type { ScsiLogger } from './logger.js';
export { outcomeForError, BackendIoError } from './sense-map.js';
export { ScsiRequest } from './request/request.js';
export type { DataOffer, RequestBuffer, RequestFrontEnd, RequestLogger, RequestScope, Residuals } from './request/front-end.js';
export { DataOutUnusable } from './request/front-end.js';
export { NO_RESIDUALS } from './request/residuals.js';
export { IO_CLASSES, IoStats, LATENCY_BUCKETS_S, SessionIo, type IoClass } from './request/io-stats.js';
export { TargetPortGroups, type AluaServed, type PortGroup, type PortGroupsConfig } from './port-groups.js';
