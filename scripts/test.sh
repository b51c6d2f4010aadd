#!/usr/bin/env bash
# The test passes `npm test` runs (docs/transport.md "Test modes"); arguments
# (e.g. --tap from .ci/run) go to every ava run.
#   1. every suite, as configured in package.json;
#   2. the fabric, target and initiator suites again with RBLK_FI_MR_MODE=basic
#      (the NVMe/TCP host's aside: they use no libfabric domain):
#      domains address memory by virtual address with provider-chosen keys, the
#      rules of the verbs provider, which tcp and sockets otherwise never apply;
#   3. the fabric suite, and the fast-path differential tests (the target's
#      native fast path's decoders, ring and RDMA, and the initiator's native
#      queue, under randomised command mixes), against the ASan+UBSan build of
#      the addon.
# Given test files, only pass 1 runs, over those files.
set -uo pipefail
cd "$(dirname "$0")/.."

for a in "$@"; do
  case "$a" in
    -*) ;;
    *) exec npx ava "$@" ;;
  esac
done

status=0
# The ASan+UBSan addon for pass 3 builds meanwhile, at low priority: pass 1
# spends much of its time waiting on daemons and timers, so the build mostly
# takes cycles the tests leave (it was 2.5 min of CI's time, built after them).
asan_log=$(mktemp)
nice -n 15 bash scripts/sanitize.sh --build-only >"$asan_log" 2>&1 &
asan_build=$!
npx ava "$@" || status=1
# io-ring.test.ts is file I/O, which no memory-registration mode touches.
fabric_tests=()
for f in test/native/*.test.ts; do
  [ "$f" = test/native/io-ring.test.ts ] || fabric_tests+=("$f")
done
# The NVMe/TCP host's suites (test/initiator/nvme-*) move their data over plain
# TCP sockets, never a libfabric domain: a memory-registration mode cannot change
# what they do, so they run once, in pass 1.
initiator_tests=()
for f in test/initiator/*.test.ts; do
  case "$f" in test/initiator/nvme-*) ;; *) initiator_tests+=("$f") ;; esac
done
RBLK_FI_MR_MODE=basic npx ava "$@" "${fabric_tests[@]}" test/target "${initiator_tests[@]}" || status=1
if ! wait "$asan_build"; then
  cat "$asan_log" >&2
  status=1
fi
rm -f "$asan_log"
bash scripts/sanitize.sh npx ava "$@" test/native test/target/fast-path-differential.test.ts test/initiator/fast-path-differential.test.ts test/initiator/fast-path-stale-answer.test.ts || status=1
exit "$status"
