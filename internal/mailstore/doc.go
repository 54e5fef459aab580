// Package mailstore is the mail engine between the protocol fronts and
// the provider (upstream.Provider), in the spirit of ProtonMail gluon's
// connector plus its state: the IMAP front adapts commands to it and
// makes no provider call and no state-store call of its own.
//
// # One operation per command
//
// Every IMAP command that changes something is exactly one call of the
// engine, which runs the whole choreography (provider calls, state store,
// mirrors, views) and answers with what the front needs to reply:
//
//   - APPEND: Store.Append — the message saved once (SaveRawMessages), its
//     UID and flags found (arrivals.go), a client's copy of a message the
//     bridge sent recognised (append.go), a retry of one whose answer was
//     lost answered from the folder (attempts.go).
//     A nil error means the provider holds the message.
//   - COPY, MOVE: Folder.Transfer — the provider's Copy or Move, the moved
//     messages out of the mirror, COPYUID when the new UIDs are certain
//     (transfer.go, copies.go). A lost answer whose work is done succeeds.
//   - EXPUNGE, UID EXPUNGE, CLOSE: Folder.Expunge (expunge.go); several
//     sessions removing the same messages at once share one call
//     (removals.go).
//   - STORE: Store.ApplyFlags — \Seen at the provider, the other flags as
//     changes applied to the set kept at that moment (a +FLAGS never
//     undoes another session's), shown to the other sessions (flags.go).
//   - FETCH of a body section: Folder.MarkRead — \Seen set, messages that
//     vanished at the provider left out (RFC 2180 §4.1).
//   - CREATE, DELETE, RENAME, SUBSCRIBE, UNSUBSCRIBE: Store.CreateFolder,
//     DeleteFolder, RenameFolder, SetSubscribed (folderops.go,
//     subscriptions.go); the front's naming rules come in as a check run
//     on the fresh folder list inside the operation.
//
// Reads (SELECT, STATUS, LIST, FETCH, SEARCH) use Store.Acquire,
// Store.Folders, Store.Subscribed, Folder's accessors (access.go) and
// Store.Bodies. Errors are the provider's sentinels (package upstream)
// or this package's (ErrFolderGone, ErrDestMissing, ErrFolderExists,
// ...); the front maps them to protocol replies in one place.
//
// # What it owns
//
//   - Store: the mirrors of every user's folders, one per (user, folder),
//     shared by all the connections that open it, forgotten Config.Idle
//     after the last one let go (store.go), with a read memo of what a
//     forgotten mirror knew of the read state (readmemo.go).
//   - Folder: the UIDs, read state, kept flags and metadata of one
//     folder, and the views of the sessions that have it selected
//     (package seqview).
//   - Polling (poll.go): one poller per held folder, paced so that polls
//     together take at most the budget's poll share.
//   - UID discovery: the provider answers APPEND, COPY and MOVE without
//     the new UIDs; arrivals.go pairs saved messages with them (by order
//     or size confirmed by their metadata, Message-ID or else subject and
//     date; by content as the last resort), discover.go places them from
//     that metadata alone when it tells all (no listing), provclock.go
//     narrows the metadata search to the moment of the save, and
//     copies.go pairs copies (COPYUID). While a transfer runs, refreshes
//     of its destination hold back the new UIDs it may have made
//     (holdBackLocked), so that no copy is shown before its flags are
//     settled; a copy a transfer paired is claimed, and flags another
//     transfer wrote down for a copy of the same message never go to it
//     (pendingFlagsFor).
//   - Metadata (meta.go): loaded for the messages that lack it only,
//     never by listing the folder again once it was listed.
//   - Raw messages (bodies.go, cache.go): an in-memory cache (never disk:
//     health data), batched downloads, read-ahead for sequential readers.
//   - Its own goroutines (background.go): pollers, the settle timer after
//     APPENDs, read-ahead. Store.Close ends them and waits for them, so
//     nothing writes into the state store once it is closed.
//
// # Locks, waits and the refresh
//
// The rules below make a wait without an end impossible by construction;
// a change must keep them.
//
//  1. Folder.mu guards a mirror's fields. It is held for moments only:
//     never across a provider call, a state-store call, or a wait for
//     another goroutine. Store.mu (the mirror table) may be taken while
//     holding Folder.mu, never the other way round.
//  2. Folder.flagMu orders the kept-flag writes of STORE with their
//     showing (flags.go). It is held across a state-store call, never
//     across a provider call, and only Folder.mu is taken under it.
//     Folder.seenMu orders the folder's \Seen changes at the provider
//     with their showing (two sessions marking one message read and
//     unread at once end as the provider does): held across a SetRead
//     and its showing, by commands and by the read marking inside a
//     refresh, and across a COPY's or MOVE's provider call (the copies
//     are read as their sources were then); so it is never held while
//     waiting for a refresh.
//  3. One refresh of a folder runs at a time (refresh.go, the flight).
//     Callers that want one share it: they wait for the flight under way,
//     always within their own context, which has a deadline (the command's
//     CallTimeout, or the poll's).
//  4. A refresh never waits for a refresh: nothing called from doRefresh
//     calls Sync, Discover or refresh. Where a refresh needs to know which
//     UIDs still exist (the read marking of appended messages refused
//     because one vanished), it uses its own listing or lists the UIDs
//     once more (mutateExisting), never a refresh. Before this rule a
//     refresh could reach itself through the read marking and wait for
//     ever, and every command on the folder with it.
//  5. A refresh waits only for provider calls, within its context: the
//     saves asked before its listing (awaitSaves) are provider calls too.
//  6. Commands may wait for another command's provider call instead of
//     racing it, within their own context: an EXPUNGE for the removal of
//     the same messages under way (removals.go), a COPY or MOVE for the
//     transfers under way into its source folder whose copies it names
//     (Store.awaitTransfersInto; it waits before noting its own transfer,
//     so two never wait for each other), a STORE for the transfers under
//     way that may have made the copies it names (their flags are placed
//     first). None is waited for under a lock, nor inside a refresh.
//
// Refreshes are versioned rather than locked out: every change a command
// applies to the mirror raises its version, and a refresh whose provider
// answers were read before such a change does not undo it (its read state
// is not applied; UIDs removed meanwhile stay removed).
//
// UIDs and flags are go-imap's types (imap.UID, imap.Flag): IMAP is the
// protocol whose model the store keeps; the SMTP front needs none of it.
package mailstore
