#!/usr/bin/env bash
# Repack NVIDIA's NVSHMEM wheel (a zip: nvidia/nvshmem/{include,lib,bin}, *.dist-info) into $PREFIX in
# conda-forge libnvshmem's layout. The wheel was verified by sha256 before it was staged here.
set -euo pipefail
whl="${DEEPEP_WHEEL:?no wheel named}"
[ -f "$whl" ] || { echo "deepep-env: $whl is not in the staged source $(pwd)" >&2; exit 1; }
x="$(pwd)/_wheel"
rm -rf "$x" && mkdir -p "$x"
if command -v unzip >/dev/null 2>&1; then
  unzip -q "$whl" -d "$x"
else
  python3 -c 'import sys, zipfile; zipfile.ZipFile(sys.argv[1]).extractall(sys.argv[2])' "$whl" "$x"
fi
root="$x/nvidia/nvshmem"
[ -d "$root/lib" ] && [ -d "$root/include" ] || { echo "deepep-env: $whl has no nvidia/nvshmem/{include,lib}" >&2; exit 1; }
ver="$(ls "$root"/lib/libnvshmem_host.so.* 2>/dev/null | head -n1 || true)"
[ -n "$ver" ] || { echo "deepep-env: $whl has no lib/libnvshmem_host.so.*" >&2; exit 1; }

mkdir -p "$PREFIX/include" "$PREFIX/lib" "$PREFIX/share/doc/nvshmem"
cp -R "$root/include/." "$PREFIX/include/"
# The libraries as shipped: host library, device library (static and bitcode), transport and
# bootstrap plugins (NVSHMEM dlopens them from its own lib/ folder), CMake config if any.
cp -R "$root/lib/." "$PREFIX/lib/"
# The wheel has only the SONAME files (libnvshmem_host.so.3; plugins nvshmem_transport_ibrc.so.4,
# which NVSHMEM dlopens by that name): add the development link a build links by (-lnvshmem_host),
# as conda-forge's libnvshmem-dev does.
[ -e "$PREFIX/lib/libnvshmem_host.so" ] || ln -s "$(basename "$ver")" "$PREFIX/lib/libnvshmem_host.so"
if [ -d "$root/bin" ]; then
  mkdir -p "$PREFIX/bin"
  cp -R "$root/bin/." "$PREFIX/bin/"
  chmod +x "$PREFIX"/bin/* 2>/dev/null || true
fi
if [ -d "$root/share" ]; then
  mkdir -p "$PREFIX/share"
  cp -R "$root/share/." "$PREFIX/share/"
fi
# License and provenance: the wheel's dist-info license files and NVSHMEM's own, if shipped.
for f in "$x"/*.dist-info/LICENSE* "$x"/*.dist-info/licenses/* "$root"/License.txt "$root"/LICENSE*; do
  [ -f "$f" ] && cp "$f" "$PREFIX/share/doc/nvshmem/"
done
ls "$PREFIX/share/doc/nvshmem/"* >/dev/null 2>&1 || { echo "deepep-env: $whl carries no license file" >&2; exit 1; }
cp "$x"/*.dist-info/METADATA "$PREFIX/share/doc/nvshmem/wheel-METADATA"
echo "$whl" > "$PREFIX/share/doc/nvshmem/wheel.txt"
echo "deepep-env: repacked $whl (NVSHMEM ${DEEPEP_NVSHMEM_VERSION:-?}): $(ls "$PREFIX/lib" | tr '\n' ' ')"
