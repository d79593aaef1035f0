# Cross-compilation to 64-bit Arm Linux (Debian's crossbuild-essential-arm64, with the arm64 -dev packages of the
# dependencies installed through multiarch: scripts/install-deps.sh arm64). Tests and the programs that CMake runs at
# build time go through user-mode QEMU, whose `-cpu max` has NEON and SVE/SVE2: `make test-arm64`.
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)
set(CMAKE_CXX_COMPILER aarch64-linux-gnu-g++)
set(CMAKE_LIBRARY_ARCHITECTURE aarch64-linux-gnu)
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
# pkg-config reads the arm64 .pc files (multiarch keeps them apart from the host's).
set(ENV{PKG_CONFIG_LIBDIR} "/usr/lib/aarch64-linux-gnu/pkgconfig:/usr/share/pkgconfig")
set(CMAKE_CROSSCOMPILING_EMULATOR qemu-aarch64 -L /usr/aarch64-linux-gnu -cpu max)
