//go:build linux && (mips || mipsle || mips64 || mips64le)

package boxinit

// rlimitNPROC is RLIMIT_NPROC (asm/resource.h on MIPS), which syscall
// lacks.
const rlimitNPROC = 8
