package director

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
)

// Hello is the first line the accepting replica sends on a link: whom
// the home is to serve, and for whom.
type Hello struct {
	// User is the Direct address the client logged in as, checked by the
	// accepting replica against the provider.
	User string `json:"user"`
	// Password is the user's, which the home's provider calls need; it
	// lives in the home's memory as any session's does.
	Password string `json:"password"`
	// Client is the client's address (host:port) as the accepting
	// replica saw it (behind a balancer, from the PROXY header), for the
	// home's logs and per-address limits.
	Client string `json:"client"`
}

// maxLine bounds a Hello and a greeting: a Direct address, a password
// and an address, or a CAPABILITY line.
const maxLine = 8 << 10

var errLineTooLong = errors.New("director: line too long")

// writeHello sends h as one line of JSON.
func writeHello(w io.Writer, h Hello) error {
	b, err := json.Marshal(h)
	if err != nil {
		return err
	}
	_, err = w.Write(append(b, '\n'))
	return err
}

// readHello reads the line writeHello sent.
func readHello(r *bufio.Reader) (Hello, error) {
	line, err := readLine(r)
	if err != nil {
		return Hello{}, err
	}
	var h Hello
	if err := json.Unmarshal(line, &h); err != nil {
		return Hello{}, fmt.Errorf("director: hello: %w", err)
	}
	if h.User == "" {
		return Hello{}, errors.New("director: hello names no user")
	}
	return h, nil
}

// ClientAddr is Hello.Client as an address (a TCP address when it
// parses as one).
func (h Hello) ClientAddr() net.Addr {
	if a, err := net.ResolveTCPAddr("tcp", h.Client); err == nil && a.IP != nil {
		return a
	}
	return clientAddr(h.Client)
}

// clientAddr is an address that is only a string.
type clientAddr string

func (a clientAddr) Network() string { return "tcp" }
func (a clientAddr) String() string  { return string(a) }

// readLine reads one line of at most maxLine bytes, without its end.
func readLine(r *bufio.Reader) ([]byte, error) {
	var line []byte
	for {
		frag, err := r.ReadSlice('\n')
		line = append(line, frag...)
		if len(line) > maxLine {
			return nil, errLineTooLong
		}
		if err == nil {
			return bytes.TrimRight(line, "\r\n"), nil
		}
		if !errors.Is(err, bufio.ErrBufferFull) {
			return nil, err
		}
	}
}
