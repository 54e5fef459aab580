package imapbackend

import (
	"context"
	"errors"
	"net"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/emersion/go-imap/v2"
	"github.com/emersion/go-imap/v2/imapserver"

	"github.com/directbridge/directbridge/internal/limits"
	"github.com/directbridge/directbridge/internal/login"
	"github.com/directbridge/directbridge/internal/mailstore"
	"github.com/directbridge/directbridge/internal/seqview"
	"github.com/directbridge/directbridge/upstream/directapi"
)

// session is one IMAP connection. Commands run one at a time per
// connection (go-imap's rule), so its fields need no lock, with two
// exceptions: go-imap closes the session while an IDLE's goroutine may
// still start (a client that drops mid-IDLE), so view is guarded by
// viewMu; and the connection slot is given back by whoever sees the
// client go first (slotUser).
type session struct {
	srv  *Server
	conn *imapserver.Conn
	id   uint64 // names the connection to the store (a retried APPEND, internal/mailstore/retries.go)

	auth directapi.Authentication // set by LOGIN; memory only
	// slotUser is the user whose connection slot this connection holds
	// (Server.addConn), nil when it holds none.
	slotUser atomic.Pointer[string]

	sel       *mailstore.Folder
	viewMu    sync.Mutex
	view      *seqview.View // this connection's view of sel
	readOnly  bool
	searchRes imap.UIDSet // SEARCHRES "$" (RFC 5182)
	// appended: the command that just ran was APPEND, whose arrival the
	// poll after it leaves to be found with the next ones (internal/mailstore/arrivals.go).
	appended bool
	// copiedAway: messages this connection copied to another folder, by
	// folder, which its EXPUNGE removes for good (expunge.go)
	copiedAway map[string]*copiedAway
	// path: how answers reach the client when another replica relays
	// them (directed.go); nil for a client connected here.
	path *linkPath
}

var (
	_ imapserver.Session               = (*session)(nil)
	_ imapserver.SessionNamespace      = (*session)(nil)
	_ imapserver.SessionMove           = (*session)(nil)
	_ imapserver.SessionAppendLimit    = (*session)(nil)
	_ imapserver.SessionUnauthenticate = (*session)(nil)
)

// ctx bounds the REST calls and waits of one command: CallTimeout, or
// until the client hangs up (peergone.go), whichever comes first.
func (s *session) ctx() (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithTimeout(context.Background(), s.srv.cfg.CallTimeout)
	if s.path != nil {
		ctx = mailstore.WithAnswerPath(ctx, s.path)
	}
	if s.conn == nil {
		return ctx, cancel
	}
	wctx, stop := watchPeer(ctx, s.conn.NetConn(), s.releaseSlot)
	return wctx, func() { stop(); cancel() }
}

// releaseSlot gives back the connection slot, once: at LOGOUT or close,
// or as soon as a running command sees that the client hung up.
func (s *session) releaseSlot() {
	if u := s.slotUser.Swap(nil); u != nil {
		s.srv.dropConn(*u)
	}
}

// Login checks the Direct address and password with the provider (shared,
// short-lived verification: Thunderbird's five connections cost one REST
// call). An unreachable provider is NO [UNAVAILABLE], never a false success.
//
// Guessing is slowed (package internal/login): an address with many failures
// waits before its attempts are checked, or is refused with NO
// [UNAVAILABLE]; every failure is logged at WARN with the address and
// the username, for fail2ban.
func (s *session) Login(username, password string) error {
	username = normalizeUser(username)
	ctx, cancel := s.ctx()
	defer cancel()
	if err := s.srv.checkLogin(ctx, s.conn.NetConn().RemoteAddr(), username, password); err != nil {
		return err
	}
	if err := s.srv.admit(ctx, username); err != nil {
		return err
	}
	s.loggedIn(username, password)
	return nil
}

// normalizeUser is the form of a Direct address the bridge keys users by.
func normalizeUser(u string) string { return strings.ToLower(strings.TrimSpace(u)) }

// checkLogin is the part of a login any replica can do (the director's
// accepting half does it, front.go): the guessing slowdown for the
// client's address, and the check of the password with the provider.
func (s *Server) checkLogin(ctx context.Context, remote net.Addr, username, password string) error {
	addr := login.Key(remote)
	release, _, err := s.guard.Admit(ctx, addr, username)
	if errors.Is(err, login.ErrRefused) {
		s.cfg.Logger.Warn("authentication refused", "proto", "imap", "remote", addr, "user", username, "reason", "too many failures from the address")
		return errTooManyFailures
	}
	if err != nil {
		return errUnavailable
	}
	err = s.cfg.Verifier.Verify(ctx, username, directapi.Secret(password))
	release()
	if err != nil {
		if errors.Is(err, login.ErrAuthFailed) {
			s.cfg.Logger.Warn("authentication failed", "proto", "imap", "remote", addr, "user", username)
			s.guard.Failed(ctx, addr, username)
		}
		return imapError(err)
	}
	return nil
}

// admit is the part of a login the replica that serves the session does:
// its state store must answer, and the user must have a connection slot
// free, which admit takes.
func (s *Server) admit(ctx context.Context, username string) error {
	if err := s.store.StateReady(ctx); err != nil {
		s.cfg.Logger.Warn("imap login refused: the state store does not answer", "user", username, "err", err)
		return errStateUnavailable
	}
	if !s.awaitConn(ctx, username) {
		return errTooManyConns
	}
	return nil
}

// loggedIn makes the session username's, once admitted (its slot taken).
func (s *session) loggedIn(username, password string) {
	s.slotUser.Store(&username)
	limits.Authenticated(s.conn.NetConn())
	s.auth = directapi.Authentication{Username: username, Password: directapi.Secret(password)}
	s.srv.cfg.Logger.Info("imap login", "user", username)
}

// Unauthenticate returns to the not-authenticated state (RFC 8437).
func (s *session) Unauthenticate() error {
	s.Unselect()
	s.releaseSlot()
	s.auth = directapi.Authentication{}
	return nil
}

// Close releases everything the connection holds.
func (s *session) Close() error {
	s.srv.mu.Lock()
	delete(s.srv.live, s)
	s.srv.mu.Unlock()
	return s.Unauthenticate()
}

// Namespace: one personal namespace with delimiter "." (RFC 2342),
// prefixed "INBOX." in the INBOX layout, where INBOX itself is the root
// as the provider's folders are, and "" in the flat layout.
func (s *session) Namespace() (*imap.NamespaceData, error) {
	return &imap.NamespaceData{Personal: []imap.NamespaceDescriptor{{Prefix: s.srv.cfg.Layout.nsPrefix(), Delim: delim}}}, nil
}

// AppendLimit is advertised as APPENDLIMIT (RFC 7889).
func (s *session) AppendLimit() uint32 { return s.srv.cfg.AppendLimit }

// Select opens a folder: its shared mirror, refreshed if stale, and a
// view of its own for this connection. The answer has what RFC 3501
// §6.3.1 asks for; go-imap writes RECENT and UNSEEN only to IMAP4rev1
// clients.
func (s *session) Select(name string, options *imap.SelectOptions) (*imap.SelectData, error) {
	s.Unselect()
	folder, err := s.folderName(name)
	if err != nil {
		return nil, err
	}
	ctx, cancel := s.ctx()
	defer cancel()
	m, err := s.acquireFolder(ctx, folder)
	if err != nil {
		return nil, err
	}
	if err := m.ShowArrivals(ctx); err != nil {
		s.srv.store.Release(m)
		return nil, imapError(err)
	}
	v, data, err := m.Mailbox().Open(seqview.ViewOptions{ReadOnly: options.ReadOnly, Rev2: s.rev2()})
	if err != nil {
		s.srv.store.Release(m)
		return nil, imapError(mailstore.ErrFolderGone)
	}
	s.viewMu.Lock()
	s.sel, s.view, s.readOnly = m, v, options.ReadOnly
	s.viewMu.Unlock()
	return data, nil
}

// Unselect leaves the selected folder.
func (s *session) Unselect() error {
	if s.sel != nil {
		s.view.Close()
		s.srv.store.Release(s.sel)
		s.viewMu.Lock()
		s.sel, s.view, s.searchRes = nil, nil, nil
		s.viewMu.Unlock()
	}
	return nil
}

// Poll writes pending updates after every command; when the folder was
// deleted or renumbered under the connection, it says BYE (RFC 9051 §7.1.5).
func (s *session) Poll(w *imapserver.UpdateWriter, allowExpunge bool) error {
	appended := s.appended
	s.appended = false
	if s.sel == nil {
		return nil
	}
	if err := s.goneCheck(); err != nil {
		return err
	}
	if !appended && s.sel.Expecting() {
		// Appends are waiting to be found: show them now (one refresh
		// for all of them, shared by every connection), or at the next
		// command when a refresh is under way already.
		ctx, cancel := s.ctx()
		if err := s.sel.ShowArrivals(ctx); err != nil {
			s.srv.cfg.Logger.Warn("imap refresh after append failed", "user", s.auth.Username, "err", err)
		}
		cancel()
	}
	return s.byeIfGone(s.view.Poll(w, allowExpunge))
}

// byeIfGone says BYE when the selected folder was deleted or renumbered
// (RFC 9051 §7.1.5) and passes err on.
func (s *session) byeIfGone(err error) error {
	if errors.Is(err, seqview.ErrGone) {
		s.conn.Bye("The selected mailbox was deleted or renumbered")
	}
	return err
}

// rev2 tells whether the client enabled IMAP4rev2, which has no \Recent
// and no RECENT response.
func (s *session) rev2() bool {
	return s.conn.EnabledCaps().Has(imap.CapIMAP4rev2)
}

// Idle waits for updates; the mirror's poller brings them.
func (s *session) Idle(w *imapserver.UpdateWriter, stop <-chan struct{}) error {
	// go-imap may close the session while this still runs (a client that
	// drops mid-IDLE): work on the view as it was.
	s.viewMu.Lock()
	v := s.view
	s.viewMu.Unlock()
	if v == nil {
		<-stop
		return nil
	}
	return s.byeIfGone(v.Idle(w, stop))
}

func (s *session) goneCheck() error { return s.goneCheckOf(s.sel) }

func (s *session) goneCheckOf(m *mailstore.Folder) error {
	if gone := m.Gone(); gone != nil {
		s.conn.Bye("The selected mailbox was deleted or renumbered")
		return gone
	}
	return nil
}

// folderName is the provider folder an IMAP name names, in the
// configured layout (layout.go), special-folder aliases resolved.
func (s *session) folderName(name string) (string, error) {
	folder, _, err := s.resolveName(name)
	return folder, err
}

// resolveName is folderName that also tells whether name was an alias
// of a special folder (specialAliases). Only a name that is an alias
// costs a look at the folder list (cached): a real folder of that name
// wins.
func (s *session) resolveName(name string) (folder string, viaAlias bool, err error) {
	folder, err = s.srv.cfg.Layout.providerName(name)
	if err != nil {
		return "", false, err
	}
	target := aliasTarget(folder)
	if target == "" {
		return folder, false, nil
	}
	ctx, cancel := s.ctx()
	defer cancel()
	fs, err := s.listFolders(ctx, folderListTTL)
	if err != nil {
		return "", false, imapError(err)
	}
	if fs.exists[folder] || !fs.exists[target] {
		// A real folder of the name wins; and with the special folder
		// gone (INBOX.Trash can be deleted) the name is just a name.
		return folder, false, nil
	}
	return target, true, nil
}

// delim is the hierarchy delimiter of the provider's folder names.
const delim = '.'
