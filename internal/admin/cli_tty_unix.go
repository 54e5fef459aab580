//go:build linux || darwin || dragonfly || freebsd || netbsd || openbsd

package admin

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"golang.org/x/sys/unix"
)

// isTerminal reports whether f is a terminal.
func isTerminal(f *os.File) bool {
	_, err := unix.IoctlGetTermios(int(f.Fd()), ioctlGetTermios)
	return err == nil
}

// readNoEcho prompts on w and reads one line from the terminal f with echo
// off. The terminal is restored also when the user interrupts.
func readNoEcho(f *os.File, w io.Writer, prompt string) (string, error) {
	fd := int(f.Fd())
	old, err := unix.IoctlGetTermios(fd, ioctlGetTermios)
	if err != nil {
		return "", err
	}
	t := *old
	t.Lflag &^= unix.ECHO
	t.Lflag |= unix.ICANON | unix.ISIG
	t.Iflag |= unix.ICRNL
	if err := unix.IoctlSetTermios(fd, ioctlSetTermios, &t); err != nil {
		return "", err
	}
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	done := make(chan struct{})
	go func() {
		select {
		case <-sigs:
			unix.IoctlSetTermios(fd, ioctlSetTermios, old)
			fmt.Fprintln(w)
			os.Exit(130)
		case <-done:
		}
	}()
	defer func() {
		close(done)
		signal.Stop(sigs)
		unix.IoctlSetTermios(fd, ioctlSetTermios, old)
		fmt.Fprintln(w) // the newline the user typed was not echoed
	}()
	fmt.Fprint(w, prompt)
	// Byte by byte, so nothing after the line is consumed.
	var line []byte
	b := make([]byte, 1)
	for len(line) < 4096 {
		n, err := f.Read(b)
		if n == 1 {
			if b[0] == '\n' {
				break
			}
			line = append(line, b[0])
			continue
		}
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return "", err
		}
	}
	if len(line) > 0 && line[len(line)-1] == '\r' {
		line = line[:len(line)-1]
	}
	return string(line), nil
}
