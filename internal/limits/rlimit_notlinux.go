//go:build !linux

package limits

// RaiseFileLimit leaves the limit as it is outside Linux: on macOS the
// hard limit may be "unlimited", which setrlimit refuses for
// RLIMIT_NOFILE (the Go runtime raises the soft limit itself there, to
// what the kernel allows). It returns the limit twice, or the error of
// reading it (always on systems without RLIMIT_NOFILE).
func RaiseFileLimit() (before, after FileLimit, err error) {
	fl, err := CurrentFileLimit()
	return fl, fl, err
}
