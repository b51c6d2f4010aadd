// Operation codes, service actions and code points shared by the target's
// command table and the initiator's CDB builders (SPC-5 and SBC-4 command
// tables; protocol-facts.md section 3).

export const Opcode = {
  TEST_UNIT_READY: 0x00,
  REQUEST_SENSE: 0x03,
  READ_6: 0x08,
  WRITE_6: 0x0a,
  INQUIRY: 0x12,
  MODE_SELECT_6: 0x15,
  RESERVE_6: 0x16,
  RELEASE_6: 0x17,
  MODE_SENSE_6: 0x1a,
  START_STOP_UNIT: 0x1b,
  PREVENT_ALLOW_MEDIUM_REMOVAL: 0x1e,
  READ_CAPACITY_10: 0x25,
  READ_10: 0x28,
  WRITE_10: 0x2a,
  WRITE_AND_VERIFY_10: 0x2e,
  VERIFY_10: 0x2f,
  PRE_FETCH_10: 0x34,
  READ_DEFECT_DATA_10: 0x37,
  SYNCHRONIZE_CACHE_10: 0x35,
  WRITE_SAME_10: 0x41,
  UNMAP: 0x42,
  MODE_SELECT_10: 0x55,
  MODE_SENSE_10: 0x5a,
  PERSISTENT_RESERVE_IN: 0x5e,
  PERSISTENT_RESERVE_OUT: 0x5f,
  READ_16: 0x88,
  COMPARE_AND_WRITE: 0x89,
  WRITE_16: 0x8a,
  ORWRITE_16: 0x8b,
  WRITE_AND_VERIFY_16: 0x8e,
  VERIFY_16: 0x8f,
  PRE_FETCH_16: 0x90,
  SYNCHRONIZE_CACHE_16: 0x91,
  WRITE_SAME_16: 0x93,
  WRITE_ATOMIC_16: 0x9c,
  EXTENDED_COPY: 0x83,
  RECEIVE_COPY_RESULTS: 0x84,
  SERVICE_ACTION_IN_16: 0x9e,
  REPORT_LUNS: 0xa0,
  MAINTENANCE_IN: 0xa3,
  READ_12: 0xa8,
  WRITE_12: 0xaa,
  WRITE_AND_VERIFY_12: 0xae,
  VERIFY_12: 0xaf,
  READ_DEFECT_DATA_12: 0xb7,
} as const;

/** SERVICE ACTION IN(16) service actions (SBC-4 5.16, 5.8). */
export const ServiceActionIn16 = {
  READ_CAPACITY_16: 0x10,
  GET_LBA_STATUS: 0x12,
} as const;

/** MAINTENANCE IN service actions (SPC-5 6.35, 6.36). */
export const MaintenanceIn = {
  REPORT_TARGET_PORT_GROUPS: 0x0a,
  REPORT_SUPPORTED_OPERATION_CODES: 0x0c,
} as const;

/** PERSISTENT RESERVE IN service actions (SPC-5 6.16.1). */
export const PrInAction = {
  READ_KEYS: 0x00,
  READ_RESERVATION: 0x01,
  REPORT_CAPABILITIES: 0x02,
  READ_FULL_STATUS: 0x03,
} as const;

/** PERSISTENT RESERVE OUT service actions (SPC-5 6.17.2). */
export const PrOutAction = {
  REGISTER: 0x00,
  RESERVE: 0x01,
  RELEASE: 0x02,
  CLEAR: 0x03,
  PREEMPT: 0x04,
  PREEMPT_AND_ABORT: 0x05,
  REGISTER_AND_IGNORE_EXISTING_KEY: 0x06,
  REGISTER_AND_MOVE: 0x07,
} as const;

/** Persistent reservation types (SPC-5 6.17.3, table 200). */
export const PrType = {
  WRITE_EXCLUSIVE: 0x1,
  EXCLUSIVE_ACCESS: 0x3,
  WRITE_EXCLUSIVE_REGISTRANTS_ONLY: 0x5,
  EXCLUSIVE_ACCESS_REGISTRANTS_ONLY: 0x6,
  WRITE_EXCLUSIVE_ALL_REGISTRANTS: 0x7,
  EXCLUSIVE_ACCESS_ALL_REGISTRANTS: 0x8,
} as const;
export type PrTypeCode = (typeof PrType)[keyof typeof PrType];

export function isPrType(n: number): n is PrTypeCode {
  return n === 1 || n === 3 || (n >= 5 && n <= 8);
}

/** PERSISTENT RESERVE OUT parameter list flags, byte 20 (SPC-5 6.17.3). */
export const PrOutFlag = {
  SPEC_I_PT: 0x08,
  ALL_TG_PT: 0x04,
  APTPL: 0x01,
} as const;

/** VPD page codes (SPC-5 7.7, SBC-4 6.6). */
export const VpdPage = {
  SUPPORTED_PAGES: 0x00,
  UNIT_SERIAL_NUMBER: 0x80,
  DEVICE_IDENTIFICATION: 0x83,
  BLOCK_LIMITS: 0xb0,
  BLOCK_DEVICE_CHARACTERISTICS: 0xb1,
  LOGICAL_BLOCK_PROVISIONING: 0xb2,
} as const;

/** Mode page codes (SBC-4 6.5, SPC-5 7.5). */
export const ModePage = {
  CACHING: 0x08,
  CONTROL: 0x0a,
  ALL: 0x3f,
} as const;

/** MODE SENSE page control field (SPC-5 6.13, table 164). */
export const PageControl = {
  CURRENT: 0,
  CHANGEABLE: 1,
  DEFAULT: 2,
  SAVED: 3,
} as const;

/** REPORT SUPPORTED OPERATION CODES reporting options (SPC-5 6.35, table 279). */
export const ReportingOptions = {
  ALL: 0,
  ONE_OPCODE: 1,
  ONE_SERVICE_ACTION: 2,
  ONE_EITHER: 3,
} as const;

/** GET LBA STATUS provisioning status (SBC-4 5.8.2, table 51). */
export const ProvisioningStatus = {
  MAPPED: 0,
  DEALLOCATED: 1,
  ANCHORED: 2,
} as const;

/** Peripheral device type for a direct-access block device (SPC-5 6.7.2). */
export const DEVICE_TYPE_DISK = 0x00;
/** Peripheral qualifier 011b with type 1Fh: no logical unit at this LUN (SPC-5 6.7.2). */
export const NO_LOGICAL_UNIT = 0x7f;
