#!/usr/bin/env bash
# Brings a Debian 12 machine (as root) to the point where rblk runs and its
# tests pass: missing apt packages, npm ci, the native addon and the
# TypeScript build. Each step runs only when needed, so a second run is quick.
#   scripts/setup.sh               everything
#   scripts/setup.sh --with-ceph   also the Ceph packages: librbd-dev (the rbd backend,
#                                  rblk_rbd.node) and a monitor and OSD for its tests;
#                                  `npm test` asks for them, `npm run demo` does not
#   scripts/setup.sh --build-only  skip apt and npm (a developer's rebuild)
set -euo pipefail
cd "$(dirname "$0")/.."

log() { printf 'setup: %s\n' "$*" >&2; }

# Build: libfabric (the fabric, required); liburing (io_uring), libfuse3 (attach
# --fuse) and libsystemd (sd_notify), each optional in CMakeLists.txt but all
# installed here, since the tests cover every part and prepack ships them all.
# Run and test: libfabric-bin (fi_info, fi_pingpong for the transport bench),
# real NBD clients, qemu-img (qemu-block-extra: its iscsi:// driver), open-iscsi (iscsiadm), fio, e2fsprogs, util-linux (losetup), systemd-analyze,
# xfsprogs (mkfs.xfs: the snapshot tests' reflink XFS), tshark (dumpcap and Wireshark's NVMe/TCP dissector:
# test/nvme/tshark.test.ts checks our framing with it).
APT_PACKAGES=(
  g++ cmake pkg-config make python3
  libfabric-dev libfabric-bin libfuse3-dev fuse3 libsystemd-dev liburing-dev
  libnbd-bin nbdkit qemu-utils qemu-block-extra fio e2fsprogs xfsprogs util-linux systemd tgt libiscsi-bin nftables
  open-iscsi tshark
)

# About 200 MB and 80 s on a fresh machine: only for the tests and for hosts that serve
# rbd volumes (docs/backends.md "rbd"), so `npm run demo` stays quick.
CEPH_PACKAGES=(ceph-mon ceph-osd ceph-common librbd-dev)
if [ "${1:-}" = "--with-ceph" ]; then
  APT_PACKAGES+=("${CEPH_PACKAGES[@]}")
fi

install_apt() {
  local missing=()
  for p in "${APT_PACKAGES[@]}"; do
    if [ "$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null)" != "install ok installed" ]; then
      missing+=("$p")
    fi
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  if [ "$(id -u)" -ne 0 ]; then
    log "missing packages: ${missing[*]} (run as root, or: sudo apt-get install ${missing[*]})"
    exit 1
  fi
  log "installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}

install_npm() {
  local stamp=node_modules/.rblk-lock
  local want
  want=$(sha256sum package-lock.json | cut -d' ' -f1)
  if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then return 0; fi
  log "npm ci"
  npm ci --no-audit --no-fund --loglevel=error
  echo "$want" >"$stamp"
}

# True when any file under the given paths is newer than the target file.
stale() {
  local target=$1
  shift
  [ -e "$target" ] || return 0
  [ -n "$(find "$@" -newer "$target" -type f -print -quit 2>/dev/null)" ]
}

build_native() {
  local out=build/Release/rblk_native.node
  # librbd-dev installed after an earlier build (a demo first, then the tests): configure
  # again, so that RBLK_WITH_RBD=AUTO finds it.
  if [ -e /usr/include/rbd/librbd.h ] && [ -e "$out" ] && [ ! -e build/Release/rblk_rbd.node ]; then
    touch CMakeLists.txt
  fi
  if stale "$out" native/src CMakeLists.txt package.json; then
    log "building the native addon"
    npx cmake-js compile --out build --log-level error >/dev/null
    touch "$out"
  fi
}

# The C transport ceiling (bench/ceiling): a plain CMake project of its own,
# built apart from cmake-js's tree so it links nothing of Node's.
build_ceiling() {
  local out=build/ceiling/rma-ceiling
  if stale "$out" bench/ceiling; then
    log "building the C transport ceiling"
    cmake -S bench/ceiling -B build/ceiling -DCMAKE_BUILD_TYPE=Release >/dev/null
    cmake --build build/ceiling >/dev/null
    touch "$out"
  fi
}

build_ts() {
  local stamp=dist/.rblk-built
  if stale "$stamp" native protocol target initiator config bench bin-src tsconfig.json package.json; then
    log "compiling TypeScript"
    rm -rf dist
    npx tsc -p tsconfig.json
    mkdir -p dist && touch "$stamp"
  fi
}

if [ "${1:-}" != "--build-only" ]; then
  install_apt
  install_npm
fi
build_native
build_ceiling
build_ts
