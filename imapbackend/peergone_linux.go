package imapbackend

import (
	"syscall"

	"golang.org/x/sys/unix"
)

// peerClosed reports whether the peer closed its side of the socket or
// the socket failed, without reading from it (poll(2) with POLLRDHUP and
// no timeout).
func peerClosed(rc syscall.RawConn) bool {
	closed := false
	rc.Control(func(fd uintptr) {
		fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLRDHUP}}
		n, err := unix.Poll(fds, 0)
		closed = err == nil && n > 0 && fds[0].Revents&(unix.POLLRDHUP|unix.POLLHUP|unix.POLLERR) != 0
	})
	return closed
}
