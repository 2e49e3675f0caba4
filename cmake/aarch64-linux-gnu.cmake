# Cross build of the CPU backend for 64-bit Arm Linux with Debian's cross compiler
# (g++-aarch64-linux-gnu) and the arm64 packages of its dependencies (multiarch). The binaries
# run under qemu-user: CMake prefixes qemu-aarch64 to every test it runs.
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)
set(CMAKE_CXX_COMPILER aarch64-linux-gnu-g++)
set(CMAKE_LIBRARY_ARCHITECTURE aarch64-linux-gnu)
set(CMAKE_CROSSCOMPILING_EMULATOR qemu-aarch64)
