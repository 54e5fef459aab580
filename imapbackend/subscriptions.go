package imapbackend

// Subscriptions follow IMAP (RFC 9051 §6.3.7, RFC 3501 §6.3.6): the list
// is the names clients subscribed, whether or not a folder has the name.
// The engine keeps them, in the provider's subscribed flags and the state
// store (internal/mailstore/subscriptions.go says how); each SUBSCRIBE and
// UNSUBSCRIBE is one mailstore.Store.SetSubscribed.

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
	return folderError(s.srv.store.SetSubscribed(ctx, s.auth, folder, on))
}
