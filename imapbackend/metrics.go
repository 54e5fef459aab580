package imapbackend

import (
	"errors"

	"github.com/emersion/go-imap/v2"
	"github.com/emersion/go-imap/v2/imapserver"
)

// Metrics receives the IMAP front's events (package internal/observe implements
// it). Every argument comes from a fixed set: never an address, folder
// name or other message content. Methods must be quick, non-blocking and
// safe for concurrent use.
type Metrics interface {
	// ConnOpened and ConnClosed bracket every connection.
	ConnOpened()
	ConnClosed()
	// Command reports a command the backend handled: its name (UID
	// variants as their base command, LSUB as LIST, AUTHENTICATE PLAIN as
	// LOGIN, CLOSE as EXPUNGE then UNSELECT) and result "ok", "no" or
	// "bad". Commands go-imap answers by itself (CAPABILITY, NOOP, syntax
	// errors) are not reported.
	Command(name, result string)
	// AuthFailed reports a refused LOGIN: reason "credentials" (the
	// provider refused them) or "unavailable" (it could not be asked).
	AuthFailed(reason string)
	// CacheLookup reports a hit or miss of the raw-message cache.
	CacheLookup(hit bool)
	// PeerMessages reports n messages asked of another replica that
	// holds them, by result: "held", "missing" or "failed".
	PeerMessages(result string, n int)
	// Directed reports a login the director handed to the user's home
	// replica: "local" (this one) or "remote" (relayed), front.go.
	Directed(home string)
	// TurnedAway reports a connection the listener's limits on
	// strangers turned away: reason "refused" (over a limit on arrival)
	// or "displaced" (let go for a newcomer), see package limits.
	TurnedAway(reason string)
}

type nopMetrics struct{}

func (nopMetrics) ConnOpened()              {}
func (nopMetrics) ConnClosed()              {}
func (nopMetrics) Command(string, string)   {}
func (nopMetrics) AuthFailed(string)        {}
func (nopMetrics) CacheLookup(bool)         {}
func (nopMetrics) PeerMessages(string, int) {}
func (nopMetrics) Directed(string)          {}
func (nopMetrics) TurnedAway(string)        {}

// commandResult is the status go-imap answers for a session method's
// error: backend errors are *imap.Error (errors.go); anything else becomes
// a NO.
func commandResult(err error) string {
	var ie *imap.Error
	switch {
	case err == nil:
		return "ok"
	case errors.As(err, &ie) && ie.Type == imap.StatusResponseTypeBad:
		return "bad"
	default:
		return "no"
	}
}

// meteredSession reports every command's result and the connection's
// lifetime, then hands over to the session. It must offer every method
// session offers, or go-imap would not find the optional interfaces
// (TestMeteredSessionHasEveryMethod checks).
type meteredSession struct {
	*session
	m Metrics
}

var (
	_ imapserver.Session               = (*meteredSession)(nil)
	_ imapserver.SessionNamespace      = (*meteredSession)(nil)
	_ imapserver.SessionMove           = (*meteredSession)(nil)
	_ imapserver.SessionAppendLimit    = (*meteredSession)(nil)
	_ imapserver.SessionUnauthenticate = (*meteredSession)(nil)
)

// newMeteredSession counts a new connection.
func newMeteredSession(s *session, m Metrics) *meteredSession {
	m.ConnOpened()
	return &meteredSession{session: s, m: m}
}

func (ms *meteredSession) observe(name string, err error) {
	ms.m.Command(name, commandResult(err))
}

func (ms *meteredSession) Close() error {
	defer ms.m.ConnClosed()
	return ms.session.Close()
}

func (ms *meteredSession) Login(username, password string) error {
	err := ms.session.Login(username, password)
	observeLogin(ms.m, err)
	return err
}

// observeLogin counts a LOGIN (or AUTHENTICATE) and its outcome: here for
// go-imap's, and in front.go for those the director's accepting half
// answers.
func observeLogin(m Metrics, err error) {
	m.Command("LOGIN", commandResult(err))
	var ie *imap.Error
	if errors.As(err, &ie) {
		switch ie.Code {
		case imap.ResponseCodeAuthenticationFailed:
			m.AuthFailed("credentials")
		case imap.ResponseCodeUnavailable:
			if ie == errTooManyFailures {
				m.AuthFailed("refused")
			} else {
				m.AuthFailed("unavailable")
			}
		}
	}
}

func (ms *meteredSession) Unauthenticate() error {
	err := ms.session.Unauthenticate()
	ms.observe("UNAUTHENTICATE", err)
	return err
}

func (ms *meteredSession) Namespace() (*imap.NamespaceData, error) {
	data, err := ms.session.Namespace()
	ms.observe("NAMESPACE", err)
	return data, err
}

func (ms *meteredSession) Select(mailbox string, options *imap.SelectOptions) (*imap.SelectData, error) {
	data, err := ms.session.Select(mailbox, options)
	name := "SELECT"
	if options != nil && options.ReadOnly {
		name = "EXAMINE"
	}
	ms.observe(name, err)
	return data, err
}

func (ms *meteredSession) Create(mailbox string, options *imap.CreateOptions) error {
	err := ms.session.Create(mailbox, options)
	ms.observe("CREATE", err)
	return err
}

func (ms *meteredSession) Delete(mailbox string) error {
	err := ms.session.Delete(mailbox)
	ms.observe("DELETE", err)
	return err
}

func (ms *meteredSession) Rename(mailbox, newName string, options *imap.RenameOptions) error {
	err := ms.session.Rename(mailbox, newName, options)
	ms.observe("RENAME", err)
	return err
}

func (ms *meteredSession) Subscribe(mailbox string) error {
	err := ms.session.Subscribe(mailbox)
	ms.observe("SUBSCRIBE", err)
	return err
}

func (ms *meteredSession) Unsubscribe(mailbox string) error {
	err := ms.session.Unsubscribe(mailbox)
	ms.observe("UNSUBSCRIBE", err)
	return err
}

func (ms *meteredSession) List(w *imapserver.ListWriter, ref string, patterns []string, options *imap.ListOptions) error {
	err := ms.session.List(w, ref, patterns, options)
	ms.observe("LIST", err)
	return err
}

func (ms *meteredSession) Status(mailbox string, options *imap.StatusOptions) (*imap.StatusData, error) {
	data, err := ms.session.Status(mailbox, options)
	ms.observe("STATUS", err)
	return data, err
}

func (ms *meteredSession) Append(mailbox string, r imap.LiteralReader, options *imap.AppendOptions) (*imap.AppendData, error) {
	data, err := ms.session.Append(mailbox, r, options)
	ms.observe("APPEND", err)
	return data, err
}

func (ms *meteredSession) Idle(w *imapserver.UpdateWriter, stop <-chan struct{}) error {
	err := ms.session.Idle(w, stop)
	ms.observe("IDLE", err)
	return err
}

func (ms *meteredSession) Unselect() error {
	err := ms.session.Unselect()
	ms.observe("UNSELECT", err)
	return err
}

func (ms *meteredSession) Expunge(w *imapserver.ExpungeWriter, uids *imap.UIDSet) error {
	err := ms.session.Expunge(w, uids)
	ms.observe("EXPUNGE", err)
	return err
}

func (ms *meteredSession) Search(kind imapserver.NumKind, criteria *imap.SearchCriteria, options *imap.SearchOptions) (*imap.SearchData, error) {
	data, err := ms.session.Search(kind, criteria, options)
	ms.observe("SEARCH", err)
	return data, err
}

func (ms *meteredSession) Fetch(w *imapserver.FetchWriter, numSet imap.NumSet, options *imap.FetchOptions) error {
	err := ms.session.Fetch(w, numSet, options)
	ms.observe("FETCH", err)
	return err
}

func (ms *meteredSession) Store(w *imapserver.FetchWriter, numSet imap.NumSet, flags *imap.StoreFlags, options *imap.StoreOptions) error {
	err := ms.session.Store(w, numSet, flags, options)
	ms.observe("STORE", err)
	return err
}

func (ms *meteredSession) Copy(numSet imap.NumSet, dest string) (*imap.CopyData, error) {
	data, err := ms.session.Copy(numSet, dest)
	ms.observe("COPY", err)
	return data, err
}

func (ms *meteredSession) Move(w *imapserver.MoveWriter, numSet imap.NumSet, dest string) error {
	err := ms.session.Move(w, numSet, dest)
	ms.observe("MOVE", err)
	return err
}
