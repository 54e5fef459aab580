package smtpbackend

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/directbridge/directbridge/directapi"
)

// A send whose outcome is unknown (the connection broke after the request
// went out, or the provider answered 5xx) is answered 451, so the client
// keeps the message and tries again. If the provider did take it the first
// time, a blind resend would deliver it twice. pendingSends remembers such
// attempts, in memory only, and on the retry of the same message looks for
// the copy the provider files in the sender's INBOX.Sent: found, the retry
// is answered 250 with that message's id and nothing is sent again.
//
// The look-up is one metadata search of INBOX.Sent narrowed to the minutes
// around the first attempt, made only when such an attempt exists, and one
// fetch of the candidates' content: a copy counts only if subject,
// recipients, body and attachments all match, so a different message with
// the same subject is never taken for the retried one. A T-user
// cannot read the mailbox it sends for, so its retries are sent again.
type pendingSends struct {
	mu sync.Mutex
	m  map[[32]byte]pendingSend
}

type pendingSend struct {
	at      time.Time
	subject string
	shown   []string // TO and CC addresses, sorted: what the Sent copy's headers show
	content [32]byte // fingerprint of body and attachments
}

// pendingTTL is how long an unknown outcome is remembered; clients retry
// within minutes to hours.
const pendingTTL = 24 * time.Hour

// sentClockSkew widens the search window around the first attempt.
const sentClockSkew = 2 * time.Minute

func newPendingSends() *pendingSends { return &pendingSends{m: map[[32]byte]pendingSend{}} }

// submissionKey identifies a submission of the same bytes by the same account.
func submissionKey(username, directAddr string, raw []byte) [32]byte {
	h := sha256.New()
	fmt.Fprintf(h, "%s\x00%s\x00", username, directAddr)
	h.Write(raw)
	var k [32]byte
	copy(k[:], h.Sum(nil))
	return k
}

func (p *pendingSends) add(key [32]byte, at time.Time, sub *Submission) {
	var shown []string
	for _, r := range sub.Message.Recipients {
		if r.Type != directapi.BCC {
			shown = append(shown, strings.ToLower(r.Email))
		}
	}
	slices.Sort(shown)
	p.mu.Lock()
	defer p.mu.Unlock()
	for k, v := range p.m {
		if time.Since(v.at) > pendingTTL {
			delete(p.m, k)
		}
	}
	p.m[key] = pendingSend{at: at, subject: sub.Message.Subject, shown: shown, content: fingerprint(sub.Message.Message)}
}

// fingerprint identifies a message's content as the provider reports it
// back: the body with line ends and trailing white space normalised (the
// provider re-encodes it), whether it is HTML, and the decoded bytes of
// every attachment, in any order.
func fingerprint(m directapi.Message) [32]byte {
	h := sha256.New()
	body := strings.TrimRight(strings.ReplaceAll(m.Body, "\r\n", "\n"), " \t\r\n")
	fmt.Fprintf(h, "%t\x00%d:%s\x00", m.HTMLBody, len(body), body)
	var parts []string
	for _, a := range m.AttachmentList {
		data, err := base64.StdEncoding.DecodeString(a.Content)
		if err != nil {
			data = []byte(a.Content)
		}
		sum := sha256.Sum256(data)
		parts = append(parts, string(sum[:]))
	}
	slices.Sort(parts)
	for _, p := range parts {
		h.Write([]byte(p))
	}
	var k [32]byte
	copy(k[:], h.Sum(nil))
	return k
}

// resolve reports whether an earlier attempt of this submission reached
// the provider, and the smtpId it got. A failed look-up is an error: the
// retry must wait rather than risk a duplicate.
func (p *pendingSends) resolve(ctx context.Context, ss *session, key [32]byte) (string, bool, error) {
	p.mu.Lock()
	ps, ok := p.m[key]
	p.mu.Unlock()
	if !ok || ss.directAddr != "" {
		return "", false, nil
	}
	auth := directapi.Authentication{Username: ss.username, Password: ss.password}
	msgs, err := ss.s.cfg.Provider.MetadataReceived(ctx, auth, "INBOX.Sent",
		ps.at.Add(-sentClockSkew), time.Now().Add(sentClockSkew))
	if err != nil {
		return "", false, err
	}
	// Candidates: same subject, sender and shown recipients, received no
	// earlier than the first attempt (less clock skew), and not a message
	// whose send the bridge already recorded as answered 250.
	var candidates []int64
	for _, m := range msgs {
		if m.Subject != ps.subject || !strings.EqualFold(m.Sender, ss.username) ||
			!m.ReceivedDate.IsZero() && m.ReceivedDate.Before(ps.at.Add(-sentClockSkew)) {
			continue
		}
		var shown []string
		for _, r := range m.Recipients {
			shown = append(shown, strings.ToLower(r.Email))
		}
		slices.Sort(shown)
		if !slices.Equal(shown, ps.shown) {
			continue
		}
		if st := ss.s.cfg.Store; st != nil {
			if known, err := st.KnownSmtpID(ctx, strings.Trim(m.MsgID, "<> ")); err != nil {
				return "", false, err
			} else if known {
				continue
			}
		}
		candidates = append(candidates, m.UID)
	}
	var found string
	if len(candidates) > 0 {
		// Only now the content: the metadata has no body.
		full, err := ss.s.cfg.Provider.Messages(ctx, auth, "INBOX.Sent", candidates)
		if err != nil {
			return "", false, err
		}
		for _, m := range full {
			if fingerprint(m.Message) == ps.content {
				found = strings.Trim(m.MsgID, "<> ")
				break
			}
		}
	}
	p.mu.Lock()
	delete(p.m, key)
	p.mu.Unlock()
	return found, found != "", nil
}
