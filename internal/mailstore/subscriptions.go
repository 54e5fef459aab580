package mailstore

import (
	"context"
	"slices"
	"strings"

	"github.com/directbridge/directbridge/upstream"
)

// Subscriptions follow IMAP (RFC 9051 §6.3.7, RFC 3501 §6.3.6): the list
// is the names clients subscribed, whether or not a folder has the name.
// The provider holds a subscribed flag per existing folder
// (SetFoldersSubscribed); the bridge's state store holds the subscribed
// names that have no folder (state.Subscriptions). The subscription
// list is the union of the two, and the engine keeps the provider's flags
// in agreement with what IMAP clients did:
//
//   - SUBSCRIBE of an existing folder sets its flag; of a name without a
//     folder, keeps the name.
//   - UNSUBSCRIBE clears the flag and forgets a kept name.
//   - CREATE: the provider may subscribe the folders it creates (the
//     embedded sandbox does; messaging-rest.md does not say), IMAP does
//     not, so the engine clears the flag of every folder the CREATE made
//     (missing parents too), except a name that was subscribed before it
//     existed, which gets its flag set and leaves the kept list.
//   - DELETE of a subscribed folder keeps its name subscribed: LIST
//     (SUBSCRIBED) shows it \NonExistent, as Dovecot does (RFC 5258 §3).
//   - RENAME: the provider's flags move with its folders.
//
// A change made through the provider's own interface shows up in the
// flags and so in the list, within FolderListTTL.

// SetSubscribed subscribes (on) or unsubscribes a provider folder name,
// one call per SUBSCRIBE or UNSUBSCRIBE; see above. Unsubscribing a name
// neither subscribed nor a folder is ErrNoSuchFolder. INBOX, always
// subscribed, is the front's to answer.
func (st *Store) SetSubscribed(ctx context.Context, auth upstream.Auth, folder string, on bool) error {
	user := auth.Username
	// The cached list: a folder deleted meanwhile is refused by the
	// provider, and then decided on a fresh one (below).
	fs, err := st.Folders(ctx, auth, FolderListTTL)
	if err != nil {
		return err
	}
	kept := st.cfg.State
	if !fs.Exists(folder) {
		if on {
			return kept.Subscribe(ctx, user, folder)
		}
		n, err := kept.Unsubscribe(ctx, user, folder)
		if err != nil {
			return err
		}
		if n == 0 {
			return ErrNoSuchFolder
		}
		return nil
	}
	err = st.cfg.Provider.SetSubscribed(ctx, auth, []string{folder}, on)
	st.foldersChanged(user, true)
	if err != nil {
		if definiteRefusal(err) {
			if fs, ferr := st.Folders(ctx, auth, 0); ferr == nil && !fs.Exists(folder) {
				// Deleted meanwhile: the name is what is subscribed.
				return st.SetSubscribed(ctx, auth, folder, on)
			}
		}
		return err
	}
	if _, err := kept.Unsubscribe(ctx, user, folder); err != nil {
		st.cfg.Logger.Warn("mailstore: subscriptions", "user", user, "err", err)
	}
	return nil
}

// subscribeCreated brings the provider's flags of the folders a CREATE or
// RENAME made (made: the folder and the parents that did not exist) in
// line with the subscription list: a name subscribed before it existed
// is set, every other one cleared. Failures are logged: the folder
// exists either way, and a wrong flag shows as a subscription the client
// can change.
func (st *Store) subscribeCreated(ctx context.Context, auth upstream.Auth, made []string) {
	user := auth.Username
	kept, err := st.cfg.State.Subscribed(ctx, user)
	if err != nil {
		st.cfg.Logger.Warn("mailstore: subscriptions", "user", user, "err", err)
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
	p := st.cfg.Provider
	if len(off) > 0 {
		if err := p.SetSubscribed(ctx, auth, off, false); err != nil {
			st.cfg.Logger.Warn("mailstore: clearing the provider's subscription of new folders", "user", user, "err", err)
		}
	}
	if len(on) > 0 {
		if err := p.SetSubscribed(ctx, auth, on, true); err != nil {
			st.cfg.Logger.Warn("mailstore: subscribing new folders", "user", user, "err", err)
		} else if _, err := st.cfg.State.Unsubscribe(ctx, user, on...); err != nil {
			st.cfg.Logger.Warn("mailstore: subscriptions", "user", user, "err", err)
		}
	}
	st.foldersChanged(user, true)
}

// keepSubscribed keeps the name of a deleted folder subscribed if it was.
func (st *Store) keepSubscribed(ctx context.Context, user, folder string, wasSubscribed bool) {
	if !wasSubscribed {
		return
	}
	if err := st.cfg.State.Subscribe(ctx, user, folder); err != nil {
		st.cfg.Logger.Warn("mailstore: subscriptions", "user", user, "err", err)
	}
	st.foldersChanged(user, true)
}

// subscribedNames is the subscription list: the provider's subscribed
// folders and the kept names (see above).
func (st *Store) subscribedNames(ctx context.Context, user string, provider []string) ([]string, error) {
	kept, err := st.cfg.State.Subscribed(ctx, user)
	if err != nil {
		return nil, err
	}
	out := append(slices.Clone(provider), kept...)
	return slices.DeleteFunc(out, func(n string) bool { return !strings.HasPrefix(n, "INBOX") }), nil
}
