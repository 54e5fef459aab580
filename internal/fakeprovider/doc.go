// Package fakeprovider is an in-memory upstream.Provider for tests of the
// mail engine: the provider's documented semantics (messaging-rest.md) as
// the REST adapter (restclient.Upstream) surfaces them, without HTTP,
// JSON or SQLite, so that a test can run thousands of random sessions
// against it in seconds.
//
// The reference is the sandbox (package sandbox), whose choices where the
// document says "not shown" it copies: the folders a new mailbox has,
// UIDs per folder growing and never reused (not even by a folder deleted
// and created again), messages saved unread, changes by UID refused whole
// when one UID is missing, reads leaving missing UIDs out, the
// MessageDetail fields. Where the adapter sends no request (a change or
// read of no UIDs), it does nothing and succeeds, as the adapter does;
// it does not split large requests into batches. Its answers are the adapter's sentinel errors: a
// refusal ("other error", code 3) is upstream.ErrRefused with the
// sandbox's text, a wrong password upstream.ErrAuth.
//
// Beyond the provider it gives a test what the real one cannot:
//
//   - latency, random within a range, half before the operation runs and
//     half after, as a network round trip splits (faults.go);
//   - faults: a call that fails with upstream.ErrTemporary before doing
//     anything, and a change that is carried out but whose answer is lost
//     (upstream.ErrUnknownOutcome) (faults.go);
//   - changes made behind the bridge's back, as another client of the
//     same mailbox would make them: Deliver, Remove, SetReadBehind
//     (behind.go);
//   - inspection: Snapshot of a folder, a call counter per operation,
//     and a journal of every change with a clock, so that a test can tell
//     which changes happened while one of its commands was under way
//     (journal.go).
//
// All methods are safe for concurrent use: one lock guards the mailboxes,
// taken for the effect of an operation only, never across its latency.
package fakeprovider
