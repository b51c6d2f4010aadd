#!/usr/bin/env node
// rblkd, the rblk target daemon: the compiled entry point (dist/ ships in the
// package; in a checkout, npm run build makes it).
import '../dist/bin-src/rblkd.js';
