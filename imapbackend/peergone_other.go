//go:build !linux

package imapbackend

import "syscall"

// peerClosed: only Linux tells a peer's FIN without reading (POLLRDHUP);
// elsewhere a command runs to its own end or timeout.
func peerClosed(syscall.RawConn) bool { return false }
