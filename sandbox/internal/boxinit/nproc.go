//go:build linux && !mips && !mipsle && !mips64 && !mips64le && !sparc64

package boxinit

// rlimitNPROC is RLIMIT_NPROC (asm-generic/resource.h), which syscall
// lacks.
const rlimitNPROC = 6
