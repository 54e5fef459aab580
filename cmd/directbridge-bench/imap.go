package main

import (
	"fmt"
	"io"
	"os"
	"slices"
	"time"

	"github.com/emersion/go-imap/v2"
	"github.com/emersion/go-imap/v2/imapclient"
)

// dialIMAP connects without TLS (the bridge offers LOGIN on loopback) and
// logs in.
func dialIMAP(addr string, a account, h *imapclient.UnilateralDataHandler) (*imapclient.Client, error) {
	opts := &imapclient.Options{UnilateralDataHandler: h}
	if os.Getenv("DIRECTBRIDGE_BENCH_IMAP_DEBUG") != "" {
		opts.DebugWriter = os.Stderr
	}
	c, err := imapclient.DialInsecure(addr, opts)
	if err != nil {
		return nil, fmt.Errorf("imap dial %s: %w", addr, err)
	}
	if err := c.Login(a.user, a.pass).Wait(); err != nil {
		c.Close()
		return nil, fmt.Errorf("imap login: %w", err)
	}
	return c, nil
}

// fetched is what drainFetch saw.
type fetched struct {
	msgs  int
	bytes int64
	uids  []imap.UID
}

// drainFetch reads a FETCH's answers as they stream in, keeping only UIDs
// and counts (bodies are read and discarded).
func drainFetch(cmd *imapclient.FetchCommand) (fetched, error) {
	var f fetched
	for msg := cmd.Next(); msg != nil; msg = cmd.Next() {
		f.msgs++
		for item := msg.Next(); item != nil; item = msg.Next() {
			switch it := item.(type) {
			case imapclient.FetchItemDataUID:
				f.uids = append(f.uids, it.UID)
			case imapclient.FetchItemDataBodySection:
				if it.Literal != nil {
					n, err := io.Copy(io.Discard, it.Literal)
					f.bytes += n
					if err != nil {
						cmd.Close()
						return f, err
					}
				}
			}
		}
	}
	return f, cmd.Close()
}

var bodyPeek = []*imap.FetchItemBodySection{{Peek: true}}

// firstSync is what a desktop client does with a new account: SELECT, the
// summary of every message (FLAGS INTERNALDATE RFC822.SIZE ENVELOPE
// BODYSTRUCTURE), then the bodies of the newest n messages in one command.
func firstSync(c *imapclient.Client, bodies int) (headers, got fetched, err error) {
	if _, err := c.Select("INBOX", nil).Wait(); err != nil {
		return headers, got, fmt.Errorf("select: %w", err)
	}
	all := imap.UIDSet{imap.UIDRange{Start: 1, Stop: 0}}
	headers, err = drainFetch(c.Fetch(all, &imap.FetchOptions{UID: true, Flags: true, InternalDate: true, RFC822Size: true,
		Envelope: true, BodyStructure: &imap.FetchItemBodyStructure{Extended: true}}))
	if err != nil {
		return headers, got, fmt.Errorf("uid fetch 1:* summary: %w", err)
	}
	uids := headers.uids
	if len(uids) > bodies {
		uids = uids[len(uids)-bodies:]
	}
	if len(uids) == 0 {
		return headers, got, nil
	}
	got, err = drainFetch(c.Fetch(imap.UIDSetNum(uids...), &imap.FetchOptions{UID: true, BodySection: bodyPeek}))
	if err != nil {
		return headers, got, fmt.Errorf("uid fetch bodies: %w", err)
	}
	if got.msgs != len(uids) {
		return headers, got, fmt.Errorf("asked for %d bodies, got %d", len(uids), got.msgs)
	}
	return headers, got, nil
}

// oneByOne is what JavaMail, mbsync, fetchmail and offlineimap do: SELECT,
// UID FETCH 1:* (UID FLAGS RFC822.SIZE), then one UID FETCH n (BODY.PEEK[])
// per message in UID order.
func oneByOne(c *imapclient.Client) (fetched, error) {
	var total fetched
	if _, err := c.Select("INBOX", nil).Wait(); err != nil {
		return total, fmt.Errorf("select: %w", err)
	}
	list, err := drainFetch(c.Fetch(imap.UIDSet{imap.UIDRange{Start: 1, Stop: 0}}, &imap.FetchOptions{UID: true, Flags: true, RFC822Size: true}))
	if err != nil {
		return total, fmt.Errorf("uid fetch 1:*: %w", err)
	}
	for _, uid := range list.uids {
		f, err := drainFetch(c.Fetch(imap.UIDSetNum(uid), &imap.FetchOptions{UID: true, BodySection: bodyPeek}))
		if err != nil {
			return total, fmt.Errorf("uid fetch %d body: %w", uid, err)
		}
		if f.msgs != 1 || f.bytes == 0 {
			return total, fmt.Errorf("uid fetch %d body: %d messages, %d bytes", uid, f.msgs, f.bytes)
		}
		total.msgs++
		total.bytes += f.bytes
	}
	return total, nil
}

// appendAll APPENDs messages to INBOX (to fill Dovecot).
func appendAll(c *imapclient.Client, c0 *corpus, from, to string, n int) error {
	for i := 0; i < n; i++ {
		m := c0.message(i, from, to)
		cmd := c.Append("INBOX", int64(len(m)), &imap.AppendOptions{Time: time.Now()})
		if _, err := cmd.Write(m); err != nil {
			return err
		}
		if err := cmd.Close(); err != nil {
			return err
		}
		if _, err := cmd.Wait(); err != nil {
			return fmt.Errorf("append %d: %w", i, err)
		}
	}
	return nil
}

// thunderbirdFields are the header fields Thunderbird asks for when it
// downloads a folder's message list (its IMAP log:
// mailnews.imap.headers).
var thunderbirdFields = []string{"From", "To", "Cc", "Bcc", "Subject", "Date", "Message-ID",
	"Priority", "X-Priority", "References", "Newsgroups", "In-Reply-To", "Content-Type", "Reply-To"}

// thunderbirdChunk is how many UIDs one of Thunderbird's header FETCHes
// covers on a large new folder (mail.imap.chunk_size grows towards a few
// hundred to thousands on a fast server).
const thunderbirdChunk = 1000

// thunderbirdSync is Thunderbird's first sync of a folder it has never
// seen: SELECT, `UID FETCH 1:* (FLAGS)`, then the message list in chunks
// of UIDs: `UID FETCH a:b (UID RFC822.SIZE FLAGS BODY.PEEK[HEADER.FIELDS
// (...)])`. No bodies: Thunderbird downloads one when it is opened (or
// later, for offline use). It returns the messages listed and the header
// bytes read.
func thunderbirdSync(c *imapclient.Client) (fetched, error) {
	var total fetched
	if _, err := c.Select("INBOX", nil).Wait(); err != nil {
		return total, fmt.Errorf("select: %w", err)
	}
	list, err := drainFetch(c.Fetch(imap.UIDSet{imap.UIDRange{Start: 1, Stop: 0}}, &imap.FetchOptions{UID: true, Flags: true}))
	if err != nil {
		return total, fmt.Errorf("uid fetch 1:* (flags): %w", err)
	}
	hdrs := []*imap.FetchItemBodySection{{Peek: true, Specifier: imap.PartSpecifierHeader, HeaderFields: thunderbirdFields}}
	uids := list.uids
	slices.Sort(uids)
	for start := 0; start < len(uids); start += thunderbirdChunk {
		chunk := uids[start:min(start+thunderbirdChunk, len(uids))]
		set := imap.UIDSet{imap.UIDRange{Start: chunk[0], Stop: chunk[len(chunk)-1]}}
		f, err := drainFetch(c.Fetch(set, &imap.FetchOptions{UID: true, RFC822Size: true, Flags: true, BodySection: hdrs}))
		if err != nil {
			return total, fmt.Errorf("uid fetch %v headers: %w", set, err)
		}
		total.msgs += f.msgs
		total.bytes += f.bytes
	}
	if total.msgs != len(uids) {
		return total, fmt.Errorf("listed %d messages, got headers of %d", len(uids), total.msgs)
	}
	return total, nil
}
