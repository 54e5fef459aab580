// Package mailstore is the mail engine between the protocol fronts and
// the provider (upstream.Provider), in the spirit of ProtonMail gluon's
// connector plus its state: the IMAP front adapts commands to it and
// makes no decision about when or how to ask the provider.
//
// What it owns:
//   - Store: the mirrors of every user's folders, one per (user, folder),
//     shared by all the connections that open it, forgotten Config.Idle
//     after the last one let go (store.go), with a read memo of what a
//     forgotten mirror knew of the read state (readmemo.go).
//   - Folder: the UIDs, read state, kept flags and metadata of one
//     folder, and the views of the sessions that have it selected
//     (package seqview). Refreshes are versioned rather than locked out
//     (refresh.go): no provider call or state-store call is made while
//     holding the folder's lock, and a change a command made is never
//     undone by a refresh that read the provider before it.
//   - Polling (poll.go): one poller per held folder, paced so that polls
//     together take at most the budget's poll share.
//   - UID discovery: the provider answers APPEND, COPY and MOVE without
//     the new UIDs; arrivals.go pairs saved messages with them (by order,
//     content or Message-ID) and copies.go pairs copies (COPYUID).
//   - Metadata (meta.go): loaded for the messages that lack it only,
//     never by listing the folder again once it was listed.
//   - Flags (flags.go): \Seen at the provider, the rest in the state
//     store, shown to every other session as FETCH FLAGS.
//   - Raw messages (bodies.go, cache.go): an in-memory cache (never disk:
//     health data), batched downloads, read-ahead for sequential readers.
//
// UIDs and flags are go-imap's types (imap.UID, imap.Flag): IMAP is the
// protocol whose model the store keeps; the SMTP front needs none of it.
package mailstore
