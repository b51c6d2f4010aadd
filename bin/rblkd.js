#!/usr/bin/env node
// rblkd, the rblk target daemon: the compiled entry point (npm run build makes dist/).
import '../dist/bin-src/rblkd.js';
