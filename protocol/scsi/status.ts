// SCSI status codes (SAM-5 5.3.1, table 32).
export const ScsiStatus = {
  GOOD: 0x00,
  CHECK_CONDITION: 0x02,
  CONDITION_MET: 0x04,
  BUSY: 0x08,
  RESERVATION_CONFLICT: 0x18,
  TASK_SET_FULL: 0x28,
  ACA_ACTIVE: 0x30,
  TASK_ABORTED: 0x40,
} as const;
export type ScsiStatusCode = (typeof ScsiStatus)[keyof typeof ScsiStatus];

export function statusName(status: number): string {
  for (const [name, value] of Object.entries(ScsiStatus)) {
    if (value === status) return name;
  }
  return `0x${status.toString(16).padStart(2, '0')}`;
}
