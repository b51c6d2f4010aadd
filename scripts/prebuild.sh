#!/usr/bin/env bash
# Copies the normal build of the native addons into prebuilds/<platform>-<arch>/,
# where native/binding.ts finds them in an installed package (the layout of
# prebuildify). `npm pack` and `npm publish` run this as `prepack`, after a
# build; run it by hand on another platform to make that platform's prebuilt
# (docs/operations.md "Prebuilt binaries for other platforms").
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/setup.sh --build-only

# dist/ must be the compile of the sources as they are now. setup.sh compiles again when a
# source is newer than its last build, which a deleted or renamed source is not: npm pack
# would ship the old file's .js, or miss the new name's. A clean compile settles both.
sources=(native protocol target initiator config bin-src)
dist_mismatch() {
  local f
  while IFS= read -r f; do
    [ -e "${f%.js}.ts" ] || { echo "prebuild: dist/$f has no source" >&2; return 0; }
  done < <(cd dist && find "${sources[@]}" -name '*.js' 2>/dev/null)
  while IFS= read -r f; do
    [ -e "dist/${f%.ts}.js" ] || { echo "prebuild: $f is not compiled in dist/" >&2; return 0; }
  done < <(find "${sources[@]}" -name '*.ts')
  return 1
}
if dist_mismatch; then
  rm -f dist/.rblk-built
  bash scripts/setup.sh --build-only
fi

tuple=$(node -p 'process.platform + "-" + process.arch')
out="prebuilds/$tuple"
rm -rf "$out"
mkdir -p "$out"
for part in rblk_native rblk_uring rblk_fuse rblk_systemd rblk_rbd; do
  src="build/Release/$part.node"
  if [ ! -e "$src" ]; then
    # A prebuilt without a part would make that feature unavailable to every
    # user of the package, so it takes a deliberate choice.
    if [ "$part" = rblk_native ] || [ -z "${RBLK_PREBUILD_PARTIAL:-}" ]; then
      echo "prebuild: $src is missing (set RBLK_PREBUILD_PARTIAL=1 to ship without the optional parts)" >&2
      exit 1
    fi
    continue
  fi
  # Debug symbols are most of the file; an installed package does not need them.
  strip --strip-unneeded -o "$out/$part.node" "$src"
done
echo "prebuild: $(ls "$out" | tr '\n' ' ')in $out" >&2
