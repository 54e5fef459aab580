//go:build unix

package limits

import (
	"fmt"
	"syscall"
)

// CurrentFileLimit reads the process's file-descriptor limit.
func CurrentFileLimit() (FileLimit, error) {
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
		return FileLimit{}, fmt.Errorf("limits: reading the file-descriptor limit: %w", err)
	}
	// The fields are int64 on some BSDs; conversion keeps either.
	return FileLimit{Soft: uint64(rl.Cur), Hard: uint64(rl.Max)}, nil
}
