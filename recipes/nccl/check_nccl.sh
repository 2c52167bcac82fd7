#!/usr/bin/env bash
# The recipe test: the installed NCCL is the release the package names, laid out as conda-forge's
# nccl, and carries device code for exactly the spec's architectures (cuobjdump --list-elf).
# Usage: check_nccl.sh PREFIX PKG_VERSION ARCHS CUDA_PREFIX   (ARCHS "90;100"; CUDA_PREFIX "" in conda mode)
set -euo pipefail
prefix=$1 version=$2 archs=$3 cuda=${4:-}
fail() { echo "FAIL: $*" >&2; exit 1; }
test -L "$prefix/lib/libnccl.so" || fail "lib/libnccl.so is not the development symlink"
test -e "$prefix/lib/libnccl.so.2" || fail "lib/libnccl.so.2 missing"
test ! -e "$prefix/lib/libnccl_static.a" || fail "the static library is not part of the package (conda-forge ships none)"
IFS=. read -r maj min pat _ <<<"$version"
code=$(printf "%d%02d%02d" "$maj" "$min" "$pat")
grep -Eq "#define NCCL_VERSION_CODE +$code\b" "$prefix/include/nccl.h" || fail "include/nccl.h is not NCCL $maj.$min.$pat ($code)"
real=$(readlink -f "$prefix/lib/libnccl.so.2")
[ "$(basename "$real")" = "libnccl.so.$maj.$min.$pat" ] || fail "libnccl.so.2 -> $(basename "$real"), expected libnccl.so.$maj.$min.$pat"
objdump=""
for c in "${cuda:+$cuda/bin/cuobjdump}" "$prefix/bin/cuobjdump" "$(command -v cuobjdump || true)"; do
  [ -n "$c" ] && [ -x "$c" ] && { objdump=$c; break; }
done
if [ -z "$objdump" ]; then echo "note: no cuobjdump here: architectures not checked"; exit 0; fi
got=$("$objdump" --list-elf "$real" | grep -o 'sm_[0-9]*[af]\?' | sort -u | tr '\n' ' ')
want=$(for a in ${archs//;/ }; do echo "sm_$a"; done | sort -u | tr '\n' ' ')
# With a Blackwell (10.x) architecture upstream adds its family/specific build of the FP8 multimem
# kernels (src/device/Makefile NVCC_GENCODE_LDMC_FP8); nothing else may appear.
case ";$archs;" in *";10"[0-9]*) got=$(echo "$got" | tr ' ' '\n' | grep -v -E '^(sm_100[af])?$' | tr '\n' ' ') ;; esac
[ "$got" = "$want" ] || fail "device code for [$got], the spec asked for [$want]"
echo "nccl $version: $(basename "$real"), device code for $got"
