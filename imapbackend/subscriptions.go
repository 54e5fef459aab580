package imapbackend

import (
	"context"
	"slices"
	"strings"
)

// Subscriptions follow IMAP (RFC 9051 §6.3.7, RFC 3501 §6.3.6): the list
// is the names clients subscribed, whether or not a folder has the name.
// The provider holds a subscribed flag per existing folder
// (SetFoldersSubscribed); the bridge's state store holds the subscribed
// names that have no folder (mailbox.Subscriptions). The subscription
// list is the union of the two, and the bridge keeps the provider's flags
// in agreement with what IMAP clients did:
//
//   - SUBSCRIBE of an existing folder sets its flag; of a name without a
//     folder, keeps the name.
//   - UNSUBSCRIBE clears the flag and forgets a kept name.
//   - CREATE: the provider may subscribe the folders it creates (the
//     embedded sandbox does; messaging-rest.md does not say), IMAP does
//     not, so the bridge clears the flag of every folder the CREATE made
//     (missing parents too), except a name that was subscribed before it
//     existed, which gets its flag set and leaves the kept list.
//   - DELETE of a subscribed folder keeps its name subscribed: LIST
//     (SUBSCRIBED) shows it \NonExistent, as Dovecot does (RFC 5258 §3).
//   - RENAME: the provider's flags move with its folders.
//
// A change made through the provider's own interface shows up in the
// flags and so in the list, within folderListTTL.

// Subscribe and Unsubscribe: see above. INBOX is always subscribed.
func (s *session) Subscribe(name string) error { return s.setSubscribed(name, true) }

// Unsubscribe: see above. UNSUBSCRIBE INBOX is refused rather than
// answered OK, since INBOX would still be listed as subscribed; that of
// a name neither subscribed nor a folder is NO [NONEXISTENT].
func (s *session) Unsubscribe(name string) error { return s.setSubscribed(name, false) }

func (s *session) setSubscribed(name string, on bool) error {
	folder, err := s.folderName(name)
	if err != nil {
		return errNoSuchMailbox
	}
	if folder == "INBOX" {
		if on {
			return nil
		}
		return errInboxSubscribed
	}
	ctx, cancel := s.ctx()
	defer cancel()
	user := s.auth.Username
	// The cached list: a folder deleted meanwhile is refused by the
	// provider, and then decided on a fresh one (below).
	fs, err := s.listFolders(ctx, folderListTTL)
	if err != nil {
		return imapError(err)
	}
	kept := s.srv.cfg.Store
	if !fs.exists[folder] {
		if on {
			return imapError(kept.Subscribe(ctx, user, folder))
		}
		n, err := kept.Unsubscribe(ctx, user, folder)
		if err != nil {
			return imapError(err)
		}
		if n == 0 {
			return errNoSuchMailbox
		}
		return nil
	}
	err = s.srv.cfg.Provider.SetSubscribed(ctx, s.auth, []string{folder}, on)
	s.srv.folders.invalidate(user, true)
	if err != nil {
		if definiteRefusal(err) {
			if fs, ferr := s.listFolders(ctx, 0); ferr == nil && !fs.exists[folder] {
				// Deleted meanwhile: the name is what is subscribed.
				return s.setSubscribed(name, on)
			}
		}
		return imapError(err)
	}
	if _, err := kept.Unsubscribe(ctx, user, folder); err != nil {
		s.srv.cfg.Logger.Warn("imap: subscriptions", "user", user, "err", err)
	}
	return nil
}

// subscribeCreated brings the provider's flags of the folders a CREATE or
// RENAME made (made: the folder and the parents that did not exist) in
// line with the subscription list: a name subscribed before it existed
// is set, every other one cleared. Failures are logged: the folder
// exists either way, and a wrong flag shows as a subscription the client
// can change.
func (s *session) subscribeCreated(ctx context.Context, made []string) {
	user := s.auth.Username
	kept, err := s.srv.cfg.Store.Subscribed(ctx, user)
	if err != nil {
		s.srv.cfg.Logger.Warn("imap: subscriptions", "user", user, "err", err)
		return
	}
	var on, off []string
	for _, n := range made {
		if slices.Contains(kept, n) {
			on = append(on, n)
		} else {
			off = append(off, n)
		}
	}
	p := s.srv.cfg.Provider
	if len(off) > 0 {
		if err := p.SetSubscribed(ctx, s.auth, off, false); err != nil {
			s.srv.cfg.Logger.Warn("imap: clearing the provider's subscription of new folders", "user", user, "err", err)
		}
	}
	if len(on) > 0 {
		if err := p.SetSubscribed(ctx, s.auth, on, true); err != nil {
			s.srv.cfg.Logger.Warn("imap: subscribing new folders", "user", user, "err", err)
		} else if _, err := s.srv.cfg.Store.Unsubscribe(ctx, user, on...); err != nil {
			s.srv.cfg.Logger.Warn("imap: subscriptions", "user", user, "err", err)
		}
	}
	s.srv.folders.invalidate(user, true)
}

// keepSubscribed keeps the name of a deleted folder subscribed if it was.
func (s *session) keepSubscribed(ctx context.Context, folder string, wasSubscribed bool) {
	if !wasSubscribed {
		return
	}
	if err := s.srv.cfg.Store.Subscribe(ctx, s.auth.Username, folder); err != nil {
		s.srv.cfg.Logger.Warn("imap: subscriptions", "user", s.auth.Username, "err", err)
	}
	s.srv.folders.invalidate(s.auth.Username, true)
}

// madeBy lists what creating folder adds to fs: folder and each level
// above it that does not exist (the provider creates missing parents).
func madeBy(fs *folderSet, folder string) []string {
	var made []string
	for _, a := range ancestors(folder) {
		if a != "INBOX" && !fs.exists[a] {
			made = append(made, a)
		}
	}
	return append(made, folder)
}

// subscribedNames is the subscription list: the provider's subscribed
// folders and the kept names (see above).
func (s *session) subscribedNames(ctx context.Context, provider []string) ([]string, error) {
	kept, err := s.srv.cfg.Store.Subscribed(ctx, s.auth.Username)
	if err != nil {
		return nil, err
	}
	out := append(slices.Clone(provider), kept...)
	return slices.DeleteFunc(out, func(n string) bool { return !strings.HasPrefix(n, "INBOX") }), nil
}
