// The wire format written once (docs/architecture.md "The wire format, written once"):
// native/src/core/wire-layout.h is what protocol/wire/c-header.ts generates from the TypeScript
// constants, and no native source carries its own copy of an opcode, a version or a layout size.
import test from 'ava';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { wireLayoutHeader } from '../../protocol/wire/c-header.js';
import { CmdField, Opcode, RspField } from '../../protocol/wire/constants.js';

const SRC = new URL('../../native/src/', import.meta.url).pathname;

test('native/src/core/wire-layout.h is current (regenerate: npx tsx scripts/wire-header.ts)', (t) => {
  t.is(readFileSync(join(SRC, 'core', 'wire-layout.h'), 'utf8'), wireLayoutHeader());
});

test('the generated header carries the opcodes and offsets the TypeScript codec uses', (t) => {
  const h = wireLayoutHeader();
  t.true(h.includes(`constexpr uint8_t kOpCmd = 0x0${Opcode.CMD};`));
  t.true(h.includes(`constexpr uint8_t kOpRsp = 0x${Opcode.RSP.toString(16)};`));
  t.true(h.includes(`constexpr size_t kCmdCdb = ${CmdField.CDB};`));
  t.true(h.includes(`constexpr size_t kRspCreditDelta = ${RspField.CREDIT_DELTA};`));
});

test('no native source defines its own copy of the wire layout', (t) => {
  const copies: string[] = [];
  const files = readdirSync(SRC, { recursive: true, encoding: 'utf8' });
  t.true(files.some((f) => f.endsWith('fast-capsule.cc')), 'the walk reaches the native sources');
  for (const f of files) {
    if (!/\.(cc|h)$/.test(f) || f.endsWith('wire-layout.h')) continue;
    readFileSync(join(SRC, f), 'utf8')
      .split('\n')
      .forEach((line, i) => {
        if (/constexpr\s+\w+\s+k(Op\w+|Version|Dir(Read|Write)|Format\w+|Simple|CmdFixed|DescriptorSize|RspFixed)\s*=/.test(line)) copies.push(`${f}:${i + 1}: ${line.trim()}`);
      });
  }
  t.deepEqual(copies, []);
});
