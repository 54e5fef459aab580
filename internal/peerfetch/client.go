package peerfetch

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"

	"github.com/emersion/go-imap/v2"

	"github.com/directbridge/directbridge/internal/cluster"
	"github.com/directbridge/directbridge/internal/mailstore"
)

// Timeout bounds one request to another replica: it answers from
// memory, so one that takes longer is busy or gone, and the provider is
// asked instead.
const Timeout = 2 * time.Second

// ErrDown is Held's answer for a replica that failed to answer a moment
// ago (cluster.DownFor), which is not asked again meanwhile. Quiet: the failure
// that made it so was reported.
var ErrDown error = downError{}

type downError struct{}

func (downError) Error() string { return "peerfetch: the replica did not answer a moment ago" }
func (downError) Quiet() bool   { return true }

// Client asks other replicas for what they hold (mailstore.Holders).
type Client struct {
	seal *sealer
	addr func(replica string) (string, bool)
	hc   *http.Client
	down cluster.DownSet // replicas that failed to answer lately
}

// NewClient returns a client reaching replicas at the addresses addr
// gives (cluster.Cluster.Addr), under journalKey.
func NewClient(journalKey []byte, addr func(replica string) (string, bool)) (*Client, error) {
	s, err := newSealer(journalKey)
	if err != nil {
		return nil, err
	}
	// The replicas' own network: no proxy from the environment, and a
	// few connections kept to each replica.
	tr := &http.Transport{Proxy: nil, DialContext: (&net.Dialer{Timeout: Timeout}).DialContext,
		MaxIdleConnsPerHost: 16, IdleConnTimeout: time.Minute}
	return &Client{seal: s, addr: addr, hc: &http.Client{Transport: tr, Timeout: Timeout}}, nil
}

// Held asks replica for the messages uids of ref it holds in memory.
// Messages it does not hold are missing from the answer, or come with
// only their metadata.
func (c *Client) Held(ctx context.Context, replica string, ref mailstore.FolderRef, uids []imap.UID) ([]mailstore.HeldMessage, error) {
	addr, ok := c.addr(replica)
	if !ok {
		return nil, nil // it serves nothing (no DIRECTBRIDGE_PEER_ADDR), or is gone
	}
	if c.down.IsDown(replica) {
		return nil, ErrDown
	}
	if len(uids) > MaxUIDs {
		uids = uids[:MaxUIDs]
	}
	req := request{T: time.Now().UnixMilli(), U: ref.User, F: ref.Folder, V: ref.Validity, I: make([]uint32, len(uids))}
	for i, u := range uids {
		req.I[i] = uint32(u)
	}
	plain, _ := json.Marshal(req) // plain data: cannot fail
	sealed := c.seal.seal(plain, []byte(requestAD))
	nonce := sealed[:c.seal.aead.NonceSize()]
	hr, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+addr+Path, bytes.NewReader(sealed))
	if err != nil {
		return nil, fmt.Errorf("peerfetch: %w", err)
	}
	hr.Header.Set("Content-Type", "application/octet-stream")
	resp, err := c.hc.Do(hr)
	if err != nil {
		if ctx.Err() == nil {
			c.down.Mark(replica)
		}
		return nil, fmt.Errorf("peerfetch: asking replica %s: %w", replica, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		io.Copy(io.Discard, io.LimitReader(resp.Body, 4096))
		return nil, fmt.Errorf("peerfetch: replica %s answered %s (do the replicas share DIRECTBRIDGE_JOURNAL_KEY?)", replica, resp.Status)
	}
	// The answer's bound, its seal, and what heldSize leaves out.
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswer+1<<20))
	if err != nil {
		return nil, fmt.Errorf("peerfetch: reading replica %s's answer: %w", replica, err)
	}
	answer, _, err := c.seal.open(body, answerADFor(nonce))
	if err != nil {
		return nil, err
	}
	return parseAnswer(answer)
}
