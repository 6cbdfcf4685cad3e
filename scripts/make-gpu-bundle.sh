#!/usr/bin/env bash
# Packs a built tree into partrain-gpu-bundle.tar.gz: what a machine with a GPU, no internet and no
# package manager needs to run gpu-validate.sh (docs/gpu-validation.md). Binaries go to bin/, the
# non-CUDA shared libraries they load to lib/, every ELF with an $ORIGIN-relative RUNPATH.
set -euo pipefail

usage() {
  cat <<'EOF'
Usage: scripts/make-gpu-bundle.sh [--build-dir DIR] [--output FILE] [--allow-cpu-only]

Packs DIR's bin/partrain, lib/libpartrain_inject.so and the GPU test executables (one per
tests/gpu/*_test.cpp) with the non-CUDA shared libraries they need into one archive:

  partrain-gpu-bundle/
    gpu-validate.sh        the one command to run on the GPU machine
    gpu-trace-levels.sh    the tracing levels' costs against plain and torch.profiler
    bin/                   partrain and the GPU tests, debug info stripped, RUNPATH $ORIGIN/../lib
    lib/                   libpartrain_inject.so, libgloo, libopenblas (opened with dlopen),
                           ... (RUNPATH $ORIGIN)
    share/partrain/        presets and SQL, found beside bin/ as after an install
    tests/                 tests/gpu/*.py: the PyTorch program gpu-validate.sh traces and its
                           trace checker (torch_nccl_program.py, check_torch_trace.py)
    MANIFEST.txt           build, the CUDA libraries the target must provide, glibc needed, files

The CUDA libraries (cudart, cuBLAS, CUPTI, NCCL) and the driver are not packed: the target
provides them (NCCL alone is ~200 MiB); gpu-validate.sh finds them there or names what is missing.

Options:
  --build-dir DIR    the built tree (default: build beside scripts/)
  --output FILE      the archive to write (default: DIR/partrain-gpu-bundle.tar.gz)
  --allow-cpu-only   pack a build without CUDA parts too (no GPU tests; for testing this script)
  -h, --help         this help

Exit codes: 0 written; 1 a missing piece or the archive over 60 MiB (the message says which);
2 bad usage.
EOF
}

die() { echo "make-gpu-bundle: error: $*" >&2; exit 1; }
usage_error() { echo "make-gpu-bundle: $*" >&2; echo "Try 'scripts/make-gpu-bundle.sh --help'." >&2; exit 2; }

readonly MAX_ARCHIVE_BYTES=$((60 * 1024 * 1024))
# Provided by the target, never packed: the CUDA toolkit's and driver's libraries ...
readonly CUDA_LIBRARY='^lib(cuda|cudart|cublas|cublasLt|cupti|nccl|nvrtc|nvrtc-builtins|nvJitLink|cudnn[a-z_]*|cufft|cufftw|curand|cusolver|cusolverMg|cusparse|cusparseLt|nvToolsExt|nvidia-[a-z-]+|nvshmem[a-z_]*)\.so'
# ... and the C and C++ runtimes every Linux has (packing glibc would break on another kernel).
readonly BASE_LIBRARY='^(linux-vdso|ld-linux[a-z0-9_-]*|libc|libm|libmvec|libdl|libpthread|librt|libutil|libresolv|libanl|libnsl|libstdc\+\+|libgcc_s)\.so'

source_dir=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build_dir="$source_dir/build"
output=""
allow_cpu_only=0
while [ $# -gt 0 ]; do
  case "$1" in
    --build-dir) [ $# -ge 2 ] || usage_error "--build-dir needs a directory"; build_dir=$2; shift 2 ;;
    --output) [ $# -ge 2 ] || usage_error "--output needs a file name"; output=$2; shift 2 ;;
    --allow-cpu-only) allow_cpu_only=1; shift ;;
    -h | --help) usage; exit 0 ;;
    *) usage_error "unknown argument '$1'" ;;
  esac
done
[ -d "$build_dir" ] || die "no build directory $build_dir: build first (make build, or cmake --build)"
build_dir=$(cd "$build_dir" && pwd)
[ -n "$output" ] || output="$build_dir/partrain-gpu-bundle.tar.gz"

PATH="$PATH:/sbin:/usr/sbin"  # ldconfig, for a user whose PATH lacks them
for tool in patchelf objcopy readelf ldd ldconfig tar gzip; do
  case $tool in objcopy | readelf) package=binutils ;; ldd | ldconfig) package=libc-bin ;; *) package=$tool ;; esac
  command -v "$tool" >/dev/null || die "$tool is not installed: scripts/install-deps.sh $package installs it"
done

partrain="$build_dir/bin/partrain"
inject="$build_dir/lib/libpartrain_inject.so"
[ -x "$partrain" ] || die "$partrain is missing: cmake --build $build_dir --target partrain"
[ -f "$inject" ] || die "$inject is missing: cmake --build $build_dir --target partrain_inject"

# One test executable per tests/gpu/*_test.cpp (tests/CMakeLists.txt names it gpu_<file>).
gpu_tests=()
dynamic_section=$(readelf -d "$partrain")  # whole: grep -q on a pipe trips pipefail (SIGPIPE)
if grep -q 'NEEDED.*\[libcudart' <<<"$dynamic_section"; then
  for source in "$source_dir"/tests/gpu/*_test.cpp; do
    [ -e "$source" ] || continue
    name="gpu_$(basename "$source" .cpp)"
    [ -x "$build_dir/tests/$name" ] ||
      die "$build_dir/tests/$name is missing (from tests/gpu/$(basename "$source")): cmake --build $build_dir --target $name"
    gpu_tests+=("$build_dir/tests/$name")
  done
  [ ${#gpu_tests[@]} -gt 0 ] || die "no tests/gpu/*_test.cpp in $source_dir: nothing would test the GPU"
elif [ $allow_cpu_only -eq 0 ]; then
  die "$partrain was built without CUDA parts, so a GPU bundle would test nothing: configure with" \
      "-DPARTRAIN_CUDA=ON on a machine with the CUDA toolkit (or pass --allow-cpu-only)"
fi

stage=$(mktemp -d "${TMPDIR:-/tmp}/partrain-gpu-bundle.XXXXXX")
trap 'rm -rf "$stage" "$output.tmp"' EXIT  # the archive is renamed into place only when whole
root="$stage/partrain-gpu-bundle"
mkdir -p "$root/bin" "$root/lib" "$root/share/partrain"

# Debug info is most of the size (partrain: ~130 MB with it); symbols stay for backtraces.
for binary in "$partrain" "${gpu_tests[@]}"; do
  objcopy --strip-debug "$binary" "$root/bin/$(basename "$binary")"
done
objcopy --strip-debug "$inject" "$root/lib/libpartrain_inject.so"

# The libraries partrain opens with dlopen, which ldd does not list, as the loader finds them here:
# OpenBLAS (runner/device/openblas_library.h). The bundle's partrain finds it by its RUNPATH.
dlopened=()
for name in libopenblas.so.0; do
  path=$(ldconfig -p | awk -v name="$name" '$1 == name && !found { print $NF; found = 1 }')  # no exit: pipefail
  [ -n "$path" ] || die "$name, which partrain opens, is not found on this machine (ldconfig -p)"
  cp -L "$path" "$root/lib/$name"
  dlopened+=("$path")
done

# Every library the binaries load (ldd lists the whole closure), except the target's own.
cuda_needed=()
while read -r name arrow path _; do
  [ "$arrow" = "=>" ] || continue
  if [[ $name =~ $CUDA_LIBRARY ]]; then cuda_needed+=("$name"); continue; fi
  [[ $name =~ $BASE_LIBRARY ]] && continue
  [ "$path" != "not" ] || die "$name, which the binaries need, is not found on this machine"
  [ -e "$root/lib/$name" ] || cp -L "$path" "$root/lib/$name"
done < <(for elf in "$partrain" "$inject" "${gpu_tests[@]}" "${dlopened[@]}"; do ldd "$elf"; done)

for binary in "$root"/bin/*; do patchelf --set-rpath '$ORIGIN/../lib' "$binary"; done
for library in "$root"/lib/*; do chmod u+w "$library"; patchelf --set-rpath '$ORIGIN' "$library"; done

cp -R "$source_dir/share/." "$root/share/partrain/"
rm -f "$root/share/partrain/CMakeLists.txt"
cp "$source_dir/scripts/gpu-validate.sh" "$root/gpu-validate.sh"
chmod +x "$root/gpu-validate.sh"
# The tracing levels' costs (issue 38): longer than gpu-validate.sh's 10 minutes, run apart.
cp "$source_dir/scripts/gpu-trace-levels.sh" "$root/gpu-trace-levels.sh"
chmod +x "$root/gpu-trace-levels.sh"
# The Python programs gpu-validate.sh runs with the target's own PyTorch (rows "torch ...").
python_files=("$source_dir"/tests/gpu/*.py)
if [ -e "${python_files[0]}" ]; then
  mkdir -p "$root/tests"
  cp "${python_files[@]}" "$root/tests/"
fi

# The newest glibc / libstdc++ symbol versions anything packed asks for: the target needs them.
newest_version() {
  readelf -V --wide "$root"/bin/* "$root"/lib/* 2>/dev/null |
    grep -o "Name: $1_[0-9.]*" | sed "s/Name: $1_//" | sort -uV | tail -1
}
cuda_list=""
[ ${#cuda_needed[@]} -eq 0 ] || cuda_list=$(printf '%s\n' "${cuda_needed[@]}" | sort -u | paste -sd ' ')
{
  echo "partrain GPU bundle"
  echo "partrain:  $("$partrain" --version 2>/dev/null | head -1)"
  echo "commit:    $(git -C "$source_dir" describe --always --dirty 2>/dev/null || echo unknown)"
  echo "built:     $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(. /etc/os-release 2>/dev/null && echo "$PRETTY_NAME")"
  echo "target must provide: an NVIDIA driver (libcuda.so.1); CUDA libraries: ${cuda_list:-none}"
  echo "target needs glibc >= $(newest_version GLIBC), libstdc++ with GLIBCXX_$(newest_version GLIBCXX)"
  echo
  echo "files (bytes):"
  (cd "$root" && find . -type f ! -name MANIFEST.txt -printf '%s\t%P\n' | sort -k2)
} >"$root/MANIFEST.txt"

mkdir -p "$(dirname "$output")"
tar -C "$stage" -czf "$output.tmp" partrain-gpu-bundle
size=$(stat -c %s "$output.tmp")
if [ "$size" -gt $MAX_ARCHIVE_BYTES ]; then
  echo "make-gpu-bundle: the largest files:" >&2
  (cd "$root" && find . -type f -printf '%s\t%P\n' | sort -rn | head -5) >&2
  die "the archive is $((size / 1048576)) MiB, over the 60 MiB limit: leave out or shrink the largest files above"
fi
mv "$output.tmp" "$output"
echo "make-gpu-bundle: wrote $output ($(awk -v b="$size" 'BEGIN { printf "%.1f MiB", b / 1048576 }'):" \
     "${#gpu_tests[@]} GPU test executable(s), $(ls "$root/lib" | wc -l) libraries; CUDA from the target: ${cuda_list:-none})"
