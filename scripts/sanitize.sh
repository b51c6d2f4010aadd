#!/usr/bin/env bash
# Runs a command with the native addon built with AddressSanitizer and
# UndefinedBehaviorSanitizer (docs/transport.md "Sanitizer build"):
#   scripts/sanitize.sh npx ava test/native
#   scripts/sanitize.sh --build-only      only (re)build the variant
# The variant is built into build-asan/ (rebuilt when native/src or
# CMakeLists.txt changed), so the normal build/ is never touched. The first
# sanitizer report ends the process with a non-zero status.
set -euo pipefail
cd "$(dirname "$0")/.."

log() { printf 'sanitize: %s\n' "$*" >&2; }

if [ $# -eq 0 ]; then
  echo "usage: scripts/sanitize.sh <command> [args...]" >&2
  exit 2
fi

out=build-asan/Release/rblk_native.node
if [ ! -e "$out" ] || [ -n "$(find native/src CMakeLists.txt package.json -newer "$out" -type f -print -quit 2>/dev/null)" ]; then
  log "building the ASan+UBSan addon into build-asan/"
  npx cmake-js compile --out build-asan --CDRBLK_SANITIZE=ON --log-level error >/dev/null
  touch "$out"
fi
[ "$1" = "--build-only" ] && exit 0

# The addon links libasan, but the runtime must be the first library in the
# process, so node itself starts with it preloaded.
libasan=$(gcc -print-file-name=libasan.so)
if [ ! -e "$libasan" ]; then
  log "libasan not found (gcc -print-file-name=libasan.so gave '$libasan'): install gcc's libasan"
  exit 1
fi
export LD_PRELOAD="$libasan${LD_PRELOAD:+:$LD_PRELOAD}"
# detect_leaks=0: V8 and node keep allocations alive until exit by design, and
# LeakSanitizer would report them all. halt_on_error makes the first finding
# fail the run. handle_segv=0 and allow_user_segv_handler=1 leave SIGSEGV to
# V8 (WebAssembly bounds traps). Callers may add options after these.
export ASAN_OPTIONS="detect_leaks=0:halt_on_error=1:handle_segv=0:allow_user_segv_handler=1${ASAN_OPTIONS:+:$ASAN_OPTIONS}"
export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1${UBSAN_OPTIONS:+:$UBSAN_OPTIONS}"
export RBLK_NATIVE=asan
exec "$@"
