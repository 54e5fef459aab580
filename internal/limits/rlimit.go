package limits

// FileLimit is the process's RLIMIT_NOFILE: the soft limit the kernel
// enforces and the hard limit up to which the process may raise it.
type FileLimit struct {
	Soft, Hard uint64
}
