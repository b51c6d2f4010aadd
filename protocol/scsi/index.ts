// The SCSI vocabulary shared by target and initiator.
export * from './opcodes.js';
export * from './status.js';
export * from './sense-codes.js';
export * from './sense.js';
export * from './lun.js';
export * from './ascii.js';
export * from './cdb.js';
export * from './inquiry.js';
export * from './read-capacity.js';
export * from './report-luns.js';
export * from './lba-status.js';
export * from './persistent-reservation.js';
export * from './mode.js';
export * from './supported-opcodes.js';
export * from './target-port-groups.js';
