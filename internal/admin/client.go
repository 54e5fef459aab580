package admin

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"
)

// maxResponseBytes bounds one response line read by Client: status
// answers for thousands of messages are large, but not unbounded.
const maxResponseBytes = 64 << 20

// Client is a connection to an admin socket. Calls on one Client are
// answered in order; it is safe for concurrent use (calls take turns).
type Client struct {
	mu   sync.Mutex
	path string
	conn net.Conn
	r    *bufio.Reader
}

// Dial connects to the admin socket at path.
func Dial(ctx context.Context, path string) (*Client, error) {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "unix", path)
	if err != nil {
		return nil, err
	}
	return &Client{path: path, conn: conn, r: bufio.NewReaderSize(conn, 64<<10)}, nil
}

// Close closes the connection.
func (c *Client) Close() error { return c.conn.Close() }

// Call runs op with args and decodes the result into result (which may be
// nil, or a *json.RawMessage to keep it as it came). A failure answer is
// returned as *Error; anything else is a connection problem, after which
// the Client is unusable.
func (c *Client) Call(ctx context.Context, op string, args, result any) error {
	req := Request{Op: op}
	if args != nil {
		b, err := json.Marshal(args)
		if err != nil {
			return fmt.Errorf("admin: encoding args: %w", err)
		}
		req.Args = b
	}
	line, err := json.Marshal(req)
	if err != nil {
		return fmt.Errorf("admin: encoding request: %w", err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if dl, ok := ctx.Deadline(); ok {
		c.conn.SetDeadline(dl)
	} else {
		c.conn.SetDeadline(time.Time{})
	}
	stop := context.AfterFunc(ctx, func() { c.conn.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	_, werr := c.conn.Write(append(line, '\n'))
	// Even when the write failed, the server may have answered before
	// it closed the connection (CodeBusy, CodeTooLarge): read that.
	data, err := readLine(c.r, maxResponseBytes)
	if err != nil && !(errors.Is(err, errTooLarge) || len(data) > 0) {
		if werr != nil {
			err = werr
		}
		return c.connErr(ctx, err)
	}
	if errors.Is(err, errTooLarge) {
		return fmt.Errorf("admin: answer longer than %d bytes", maxResponseBytes)
	}
	var resp Response
	if err := json.Unmarshal(data, &resp); err != nil {
		return fmt.Errorf("admin: the answer is not JSON: %w", err)
	}
	if !resp.OK {
		return &Error{Code: resp.Code, Message: resp.Error}
	}
	if result != nil && len(resp.Result) > 0 {
		if err := json.Unmarshal(resp.Result, result); err != nil {
			return fmt.Errorf("admin: decoding the result of %s: %w", op, err)
		}
	}
	return nil
}

// connErr names the socket as dialed: the server's own address is the
// private name it was bound at before it was moved into place.
func (c *Client) connErr(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		err = ctx.Err()
	} else if oe, ok := err.(*net.OpError); ok {
		err = oe.Err
	}
	return fmt.Errorf("admin: %s: %w", c.path, err)
}
