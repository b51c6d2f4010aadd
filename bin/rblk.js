#!/usr/bin/env node
// rblk, the initiator's command line: the compiled entry point (dist/ ships in the
// package; in a checkout, npm run build makes it).
import '../dist/bin-src/rblk.js';
