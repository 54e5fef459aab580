//go:build !unix

package connguard

import "errors"

// errNoFileLimit is returned where the system has no RLIMIT_NOFILE.
var errNoFileLimit = errors.New("connguard: no file-descriptor limit on this system")

// CurrentFileLimit fails on systems without RLIMIT_NOFILE (Windows):
// DefaultTotal then takes its upper bound.
func CurrentFileLimit() (FileLimit, error) {
	return FileLimit{}, errNoFileLimit
}
