#!/usr/bin/env bash
# The test passes `npm test` runs (docs/transport.md "Test modes"); arguments
# (e.g. --tap from .ci/run) go to every ava run.
#   1. every suite, as configured in package.json, but those passes 2 and 3
#      both run (test/native and the fast path's differentials);
#   2. the fabric suites, and the target's and initiator's suites that move
#      data by RDMA (listed below), again with RBLK_FI_MR_MODE=basic:
#      domains address memory by virtual address with provider-chosen keys, the
#      rules of the verbs provider, which tcp and sockets otherwise never apply;
#   3. the fabric suite, and the fast-path differential tests (the target's
#      native fast path's decoders, ring and RDMA, and the initiator's native
#      queue, under randomised command mixes, and its trains of the common read
#      and write), against the ASan+UBSan build of
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
# How busy the machine's cores were over a pass (from /proc/stat), printed
# with its time: it tells whether more ava concurrency could shorten the pass
# (cores idle while tests wait on timers) or not (cores already busy).
cpu_now() {
  local _ u n s i w q sq st
  read -r _ u n s i w q sq st _ </proc/stat
  echo "$((u + n + s + q + sq + st)) $((u + n + s + i + w + q + sq + st))"
}
pass_timing() {
  local busy total
  read -r busy total <<<"$(cpu_now)"
  echo "# timing: $1 took $((SECONDS - pass_start)) s, cores $(((busy - cpu_start_busy) * 100 / (total - cpu_start_total + 1)))% busy" >&2
}
pass_begin() {
  pass_start=$SECONDS
  read -r cpu_start_busy cpu_start_total <<<"$(cpu_now)"
}
# The ASan+UBSan addon for pass 3 builds meanwhile, at low priority: pass 1
# spends much of its time waiting on daemons and timers, so the build mostly
# takes cycles the tests leave (it was 2.5 min of CI's time, built after them).
asan_log=$(mktemp)
nice -n 15 bash scripts/sanitize.sh --build-only >"$asan_log" 2>&1 &
asan_build=$!
# Pass 1 leaves out the suites passes 2 and 3 run anyway, the fabric suites
# (test/native) and the fast path's differentials: pass 2 runs them on this
# build (basic MR), pass 3 on the sanitizer build (the default MR mode), so
# each build and each MR mode still runs them once. Every other suite moves its
# data through this build's addon in the default mode.
native_again=('test/native/**' test/target/fast-path-differential.test.ts test/initiator/fast-path-differential.test.ts test/initiator/fast-path-stale-answer.test.ts)
pass_begin
npx ava "$@" 'test/**/*.test.ts' "${native_again[@]/#/!}" || status=1
pass_timing "pass 1"
# Of the fabric suites, pass 2 leaves out those no memory-registration mode
# touches: io-ring (file I/O), fast-decode (the capsule decoders on plain
# buffers, fuzzed), optional-parts (which addons load) and child-fds
# (descriptors a child inherits).
fabric_tests=()
for f in test/native/*.test.ts; do
  case "$(basename "$f" .test.ts)" in io-ring | fast-decode | optional-parts | child-fds) ;; *) fabric_tests+=("$f") ;; esac
done
# Of the target's and initiator's suites, pass 2 reruns those that move data
# by RDMA or register memory (their names below). The others (login, pre-login
# limits, capsule decoding, fencing, options, deadlines, the heap trimmer, the
# NVMe/TCP host's suites, which use no libfabric domain at all, and the fast
# path's QoS parking and failure hand-off, which move data the way the fast
# path's differential already runs here)
# exercise nothing a memory-registration mode changes, so they run once, in
# pass 1.
mr_tests=()
for f in test/target/*.test.ts test/initiator/*.test.ts; do
  case "$(basename "$f" .test.ts)" in
    fast-path-qos | fast-path-failed) ;;
    atomic-and-copy | data-path | descriptor-range | end-to-end | fast-path-* | \
      io | memory-lifetime | multi-connection | rdm-url | reconnect) mr_tests+=("$f") ;;
  esac
done
# The sanitizer build (about 70 s on two cores alone) has had only the cycles
# pass 1 left; if it is not done yet, it finishes with the machine to itself
# rather than at nice 15 beside pass 2. The timing line says how long that was
# (0 s when pass 1 left it enough).
wait_begin=$SECONDS
if ! wait "$asan_build"; then
  cat "$asan_log" >&2
  status=1
fi
rm -f "$asan_log"
echo "# timing: the sanitizer build's rest took $((SECONDS - wait_begin)) s" >&2
# Passes 2 and 3 run side by side (no test measures time). Measured on the
# 2-core CI machine: 151 s together against 59 + 99 s one after the other,
# with the cores 98-99% busy either way, so it gains little beyond the idle
# tail of each. Pass 2's output is held in a file and printed after pass 3's,
# so the TAP of the two never interleaves.
pass2_out=$(mktemp)
(
  pass_begin
  rc=0
  RBLK_FI_MR_MODE=basic npx ava "$@" "${fabric_tests[@]}" "${mr_tests[@]}" >"$pass2_out" 2>&1 || rc=1
  pass_timing "pass 2 (basic MR)" 2>>"$pass2_out"
  exit "$rc"
) &
pass2=$!
pass_begin
bash scripts/sanitize.sh npx ava "$@" test/native test/target/fast-path-differential.test.ts test/initiator/fast-path-differential.test.ts test/initiator/fast-path-stale-answer.test.ts test/initiator/common-io.test.ts || status=1
pass_timing "pass 3 (ASan)"
wait "$pass2" || status=1
cat "$pass2_out"
rm -f "$pass2_out"
exit "$status"
