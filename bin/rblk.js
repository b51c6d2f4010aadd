#!/usr/bin/env node
// rblk, the initiator's command line: the compiled entry point (npm run build makes dist/).
import '../dist/bin-src/rblk.js';
