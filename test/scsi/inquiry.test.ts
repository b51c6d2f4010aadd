import test from 'ava';
import * as cdb from '../../protocol/scsi/cdb.js';
import {
  Association,
  CodeSet,
  DesignatorType,
  parseBlockDeviceCharacteristics,
  parseBlockLimits,
  parseDeviceIdentification,
  parseLogicalBlockProvisioning,
  parseStandardInquiry,
  parseSupportedVpdPages,
  parseUnitSerialNumber,
  ProvisioningType,
} from '../../protocol/scsi/inquiry.js';
import { INVALID_FIELD_IN_CDB, LOGICAL_UNIT_NOT_SUPPORTED } from '../../protocol/scsi/sense-codes.js';
import { assertGood, assertSense, makeLu, nexus, run, UUID } from './helpers/harness.js';

const n = nexus('iqn.test:inq');

test('standard INQUIRY describes a disk with SPC-4 version and ASCII identification', async (t) => {
  const { lu } = makeLu({ vendor: 'ACME', product: 'Blockbuster', revision: '1.2' });
  const r = await run(lu, n, cdb.inquiry(255));
  assertGood(t, r);
  t.is(r.data.length, 66);
  const inq = parseStandardInquiry(r.data);
  t.like(inq, {
    peripheralQualifier: 0,
    deviceType: 0,
    version: 6,
    responseDataFormat: 2,
    hiSup: true,
    cmdQue: true,
    vendor: 'ACME',
    product: 'Blockbuster',
    revision: '1.2',
  });
  t.is(inq.additionalLength, r.data.length - 5);
});

test('INQUIRY truncates to the allocation length', async (t) => {
  const { lu } = makeLu();
  const r = await run(lu, n, cdb.inquiry(5));
  assertGood(t, r);
  t.is(r.data.length, 5);
  t.is(r.data[4], 61);
});

test('INQUIRY for a LUN with no logical unit reports qualifier 011b; VPD there is LUN NOT SUPPORTED', async (t) => {
  const r = await run(undefined, n, cdb.inquiry(96));
  assertGood(t, r);
  t.is(r.data[0], 0x7f);
  assertSense(t, await run(undefined, n, cdb.inquiry(96, 0x80)), LOGICAL_UNIT_NOT_SUPPORTED);
});

test('INQUIRY rejects a page code without EVPD, CMDDT and unknown VPD pages', async (t) => {
  const { lu } = makeLu();
  const noEvpd = cdb.inquiry(96);
  noEvpd[2] = 0x80;
  const r1 = await run(lu, n, noEvpd);
  assertSense(t, r1, INVALID_FIELD_IN_CDB);
  t.deepEqual(r1.sense?.fieldPointer, { inCdb: true, byte: 2 });
  const cmddt = cdb.inquiry(96);
  cmddt[1] = 0x02;
  assertSense(t, await run(lu, n, cmddt), INVALID_FIELD_IN_CDB);
  assertSense(t, await run(lu, n, cdb.inquiry(96, 0x89)), INVALID_FIELD_IN_CDB);
});

test('VPD 00h lists the supported pages in ascending order', async (t) => {
  const { lu } = makeLu();
  const r = await run(lu, n, cdb.inquiry(255, 0x00));
  assertGood(t, r);
  const pages = parseSupportedVpdPages(r.data);
  t.deepEqual(pages, [0x00, 0x80, 0x83, 0xb0, 0xb1, 0xb2]);
  for (const p of pages) assertGood(t, await run(lu, n, cdb.inquiry(255, p)), `page ${p}`);
});

test('VPD 80h is the configured serial, or the identifier in hex', async (t) => {
  const a = makeLu({ serial: 'SER-0042' }).lu;
  t.is(parseUnitSerialNumber((await run(a, n, cdb.inquiry(255, 0x80))).data), 'SER-0042');
  const b = makeLu().lu;
  t.is(parseUnitSerialNumber((await run(b, n, cdb.inquiry(255, 0x80))).data), UUID.replace(/-/g, ''));
});

test('VPD 83h carries a stable NAA-6 designator derived from the identifier', async (t) => {
  const one = makeLu({ ieeeCompanyId: 0x001122 }).lu;
  const two = makeLu({ ieeeCompanyId: 0x001122, name: 'other-name' }).lu;
  const other = makeLu({ ieeeCompanyId: 0x001122, identifier: '00000000-0000-4000-8000-000000000001' }).lu;
  const ids = async (lu: typeof one) => parseDeviceIdentification((await run(lu, n, cdb.inquiry(255, 0x83))).data);
  const d1 = await ids(one);
  const naa = d1.find((d) => d.type === DesignatorType.NAA);
  t.truthy(naa);
  if (!naa) return;
  t.is(naa.codeSet, CodeSet.BINARY);
  t.is(naa.association, Association.LOGICAL_UNIT);
  t.is(naa.value.length, 16);
  t.is(naa.value[0] >> 4, 6);
  t.is(((naa.value[0] & 0x0f) << 20) | (naa.value[1] << 12) | (naa.value[2] << 4) | (naa.value[3] >> 4), 0x001122);
  // The low 100 bits are the identifier's low 100 bits.
  const id = BigInt(`0x${UUID.replace(/-/g, '')}`);
  const v = BigInt(`0x${naa.value.toString('hex')}`);
  t.is(v & ((1n << 100n) - 1n), id & ((1n << 100n) - 1n));
  // Same identifier, same identifying designators, whatever the volume is called; the
  // volume-name designator ("RBLK" + "volume:<name>") is the one that follows the name.
  const isName = (d: { type: number; value: Buffer }) => d.type === DesignatorType.T10_VENDOR_ID && d.value.subarray(8).toString('latin1').startsWith('volume:');
  t.deepEqual((await ids(two)).filter((d) => !isName(d)), d1.filter((d) => !isName(d)));
  t.is((await ids(two)).find(isName)?.value.subarray(8).toString('latin1'), 'volume:other-name');
  t.is(d1.find(isName)?.value.subarray(0, 8).toString('latin1'), 'RBLK    ');
  t.notDeepEqual((await ids(other)).find((d) => d.type === DesignatorType.NAA)?.value, naa.value);
  const t10 = d1.find((d) => d.type === DesignatorType.T10_VENDOR_ID);
  t.is(t10?.value.subarray(0, 8).toString('latin1'), 'RBLK    ');
  const name = d1.find((d) => d.type === DesignatorType.SCSI_NAME_STRING);
  t.is(name?.value.toString('utf8').replace(/\0+$/, ''), `naa.${naa.value.toString('hex').toUpperCase()}`);
});

test('VPD B0h reports the configured limits', async (t) => {
  const { lu } = makeLu({
    limits: {
      maxTransferBlocks: 512,
      optimalTransferBlocks: 128,
      maxUnmapLbaCount: 4096,
      maxUnmapDescriptors: 16,
      unmapGranularity: 8,
      maxWriteSameBlocks: 1024,
      maxCompareAndWriteBlocks: 4,
    },
  });
  const r = await run(lu, n, cdb.inquiry(255, 0xb0));
  t.is(r.data.length, 64);
  t.is(r.data.readUInt16BE(2), 0x3c);
  t.like(parseBlockLimits(r.data), {
    wsnz: false,
    maxCompareAndWriteLength: 4,
    maxTransferLength: 512,
    optimalTransferLength: 128,
    maxUnmapLbaCount: 4096,
    maxUnmapBlockDescriptorCount: 16,
    optimalUnmapGranularity: 8,
    unmapGranularityAlignmentValid: true,
    maxWriteSameLength: 1024,
  });
});

test('VPD B0h reports no UNMAP limits on a fully provisioned LU', async (t) => {
  const { lu } = makeLu({ canDiscard: false });
  const bl = parseBlockLimits((await run(lu, n, cdb.inquiry(255, 0xb0))).data);
  t.is(bl.maxUnmapLbaCount, 0);
  t.is(bl.maxUnmapBlockDescriptorCount, 0);
});

test('VPD B1h says non-rotating; B2h reflects thin or full provisioning', async (t) => {
  const thin = makeLu().lu;
  t.is(parseBlockDeviceCharacteristics((await run(thin, n, cdb.inquiry(255, 0xb1))).data).rotationRate, 1);
  t.like(parseLogicalBlockProvisioning((await run(thin, n, cdb.inquiry(255, 0xb2))).data), {
    lbpu: true,
    lbpws: true,
    lbpws10: true,
    lbprz: true,
    provisioningType: ProvisioningType.THIN,
  });
  const full = makeLu({ thin: false }).lu;
  t.like(parseLogicalBlockProvisioning((await run(full, n, cdb.inquiry(255, 0xb2))).data), {
    lbpu: false,
    lbpws: false,
    provisioningType: ProvisioningType.FULL,
  });
});

test('LogicalUnit rejects a bad identifier and inconsistent limits', (t) => {
  t.throws(() => makeLu({ identifier: 'not-a-uuid' }), {
    instanceOf: RangeError,
    message: 'identifier "not-a-uuid" is not 32 hex digits (a UUID)',
  });
  t.throws(() => makeLu({ limits: { maxCompareAndWriteBlocks: 300 } }), { message: 'maxCompareAndWriteBlocks is at most 255' });
});
