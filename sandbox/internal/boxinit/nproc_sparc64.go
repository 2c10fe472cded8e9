//go:build linux && sparc64

package boxinit

// rlimitNPROC is RLIMIT_NPROC (asm/resource.h on SPARC), which syscall
// lacks.
const rlimitNPROC = 7
