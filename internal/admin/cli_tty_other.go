//go:build !(linux || darwin || dragonfly || freebsd || netbsd || openbsd)

package admin

import (
	"io"
	"os"
)

// isTerminal is false where echo cannot be turned off: the password is
// then read as a plain line (set DIRECTBRIDGE_ADMIN_PASSWORD instead).
func isTerminal(*os.File) bool { return false }

func readNoEcho(*os.File, io.Writer, string) (string, error) { return "", nil }
