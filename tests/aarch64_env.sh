# Sourced by the aarch64 runners (tests/kernels/run_aarch64_qemu.sh,
# tests/mcu/run_unit_aarch64.sh): checks the cross toolchain and qemu-user,
# plus what the caller adds in $extra_checks ("path|package" words), and
# sets $qemu_prefix, the emulator's one C library (see
# cmake/toolchains/aarch64-linux-gnu.cmake). Exits 77 (skip) where a piece
# is missing, or 1 in CI (CI=true), where .ci/deps installs them.
missing=""
command -v clang >/dev/null || missing="$missing clang"
command -v qemu-aarch64 >/dev/null || missing="$missing qemu-user"
[ -f /usr/aarch64-linux-gnu/lib/libc.so ] || missing="$missing libc6-dev-arm64-cross"
ls /usr/lib/gcc-cross/aarch64-linux-gnu/*/libgcc.a >/dev/null 2>&1 || missing="$missing libgcc-12-dev-arm64-cross"
command -v aarch64-linux-gnu-ld >/dev/null || missing="$missing binutils-aarch64-linux-gnu"
for c in ${extra_checks:-}; do
  [ -e "${c%%|*}" ] || missing="$missing ${c#*|}"
done
if [ -n "$missing" ]; then
  echo "aarch64 cross toolchain incomplete (missing:$missing)"
  if [ "${CI:-}" = true ]; then echo "CI=true: .ci/deps should have installed them"; exit 1; fi
  echo "KVC_SKIP: skipped"; exit 77
fi
qemu_prefix=/usr/aarch64-linux-gnu
[ -e /lib/ld-linux-aarch64.so.1 ] && qemu_prefix=/
