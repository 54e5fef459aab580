package limits

import (
	"fmt"
	"syscall"
)

// RaiseFileLimit raises the process's soft file-descriptor limit to its
// hard limit, as Dovecot and nginx do at start: the listeners' totals are
// shares of the soft limit, and a soft limit left low (1,024 is common)
// makes them small for no reason, since the hard limit is what the
// administrator granted. The Go runtime raises it only to one below the
// hard limit (syscall's init, so that it can tell a later prlimit from
// its own), and only where the os package is linked; doing it here makes
// the figure the bridge derives from explicit. Child processes then
// inherit the raised limit (syscall.Setrlimit tells os/exec not to
// restore the original); the bridge starts none. It returns the limit
// before and after.
func RaiseFileLimit() (before, after FileLimit, err error) {
	if before, err = CurrentFileLimit(); err != nil {
		return before, before, err
	}
	if before.Soft >= before.Hard {
		return before, before, nil
	}
	rl := syscall.Rlimit{Cur: before.Hard, Max: before.Hard}
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
		return before, before, fmt.Errorf("limits: raising the file-descriptor limit from %d to %d: %w", before.Soft, before.Hard, err)
	}
	after, err = CurrentFileLimit()
	return before, after, err
}
