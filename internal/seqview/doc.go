// Package seqview keeps what IMAP sessions see of one folder: the shared
// in-memory truth of the folder (Mailbox) and, per connection that has it
// selected, the sequence numbers and pending updates of that connection
// (View). It is pure and synchronous: no I/O and no provider calls. The
// layer that talks to the provider (mailstore) feeds a Mailbox with what it
// learns (new messages, expunges, flag changes, a renumbered folder); the
// IMAP front resolves sequence and UID sets through a View and writes what
// View.Updates returns.
//
// # Sharing instead of copying
//
// A Mailbox holds its message list as an immutable snapshot: a slice of
// message records in UID order that is never changed in place once a view
// may hold it. Adding messages appends beyond the end of the slice (views
// hold capped slices that never reach there); expunging builds a new slice.
// A View holds the snapshot it has shown to its client, so an idle
// connection costs a few hundred bytes however large the folder is, and a
// message another session expunged stays reachable through the snapshot of
// every view that has not told its client yet (RFC 9051 §7.5.1: the client
// still sees it, and may still fetch it).
//
// Flag changes are numbered (a modification number that only grows) and
// kept in a bounded change log. A view remembers the number it has caught
// up to and reads the log from there; a view that fell behind the log
// compares the modification number of every message it shows instead.
//
// # Concurrency
//
// Every Mailbox has its own mutex. It guards the Mailbox and also the state
// of each of its Views, so every method of both types takes it for a short,
// bounded time (at most a walk over one folder's message list) and never
// calls out while holding it. Mutations (Mailbox.Add, Mailbox.Expunge,
// Mailbox.SetFlags, Mailbox.Gone) may come from any goroutine. A View
// belongs to one connection, which runs one command at a time; its methods
// are safe to call from several goroutines (an IDLE loop and a Close racing
// with it), but their results only make sense in the order the connection
// writes responses.
//
// Slices of flags handed out (by Flags, FetchFlags, Resolve and Updates) are
// shared and never changed afterwards by this package; callers must not
// change them either.
//
// # Protocol rules this package enforces by construction
//
//   - Sequence numbers are those the client has been told of: new messages
//     count only after an EXISTS, expunged ones until their EXPUNGE (RFC 9051
//     §2.3.1.2, §7.5.1). A sequence number beyond them is an error the front
//     answers BAD (RFC 3501 §9, seq-number).
//   - EXPUNGE numbers are computed when the response is produced, in order, so
//     each is right at the moment it is sent (RFC 9051 §7.5.1).
//   - A keyword reaches a client in FLAGS before any FETCH shows it (RFC 9051
//     §7.3.5, §2.3.2), and the keywords announced to a session only grow while
//     it has the folder selected, so FLAGS never drops a keyword the session
//     may still see.
//   - \Recent goes to the first read-write session told of a message;
//     read-only (EXAMINE) sessions see it but do not take it (RFC 3501
//     §2.3.2).
//
// # Using it from an IMAP front
//
//   - SELECT/EXAMINE: Mailbox.Open gives the View and the SELECT data.
//     UNSELECT, CLOSE, another SELECT and logout: View.Close.
//   - Every command naming messages: View.Resolve. ErrBadSeqNum is BAD.
//     A target with Seq 0 (UID set, not told yet) has no number to answer
//     with; one with Live false was expunged and can be read, not changed.
//   - FETCH: View.FetchFlags for the FLAGS item (and after setting \Seen,
//     which the front does with Mailbox.SetFlags passing the view as except).
//   - STORE: Mailbox.SetFlags with the view as except, then View.QueueFetch
//     of the stored UIDs unless .SILENT: go-imap's poll after the command
//     writes FLAGS (when needed) and the FETCH answers.
//   - EXPUNGE, UID EXPUNGE, MOVE: Mailbox.Expunge; the poll after the
//     command writes the EXPUNGE responses, numbered for this session.
//   - Session.Poll: View.Poll; Session.Idle: View.Idle. ErrGone from
//     either: say BYE (imapserver.Conn.Bye) and return the error.
package seqview
