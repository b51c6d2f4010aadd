// Writes native/src/core/wire-layout.h from protocol/wire/constants.ts (protocol/wire/c-header.ts):
//   npx tsx scripts/wire-header.ts
import { writeFileSync } from 'node:fs';
import { wireLayoutHeader } from '../protocol/wire/c-header.js';

const out = new URL('../native/src/core/wire-layout.h', import.meta.url);
writeFileSync(out, wireLayoutHeader());
process.stdout.write(`wrote ${out.pathname}\n`);
