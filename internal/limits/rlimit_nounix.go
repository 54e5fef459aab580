//go:build !unix

package limits

import "errors"

// errNoFileLimit is returned where the system has no RLIMIT_NOFILE.
var errNoFileLimit = errors.New("limits: no file-descriptor limit on this system")

// CurrentFileLimit fails on systems without RLIMIT_NOFILE (Windows):
// DefaultTotal then takes its upper bound.
func CurrentFileLimit() (FileLimit, error) {
	return FileLimit{}, errNoFileLimit
}
