// Package enginetest holds the model-based test of the mail engine
// (model_test.go and the files beside it); it has no code of its own.
//
// The test runs the real IMAP front (package imapbackend, with its
// engine, package mailstore, and a real state store) on an in-memory
// provider (internal/fakeprovider) over loopback TCP, and drives it with
// several go-imap clients of two users at once, each issuing random
// commands, while another client of the same mailboxes delivers and
// removes messages at the provider behind the bridge's back. Every
// message carries a unique X-Model-Id header, so the model can follow it
// through copies and moves by content.
//
// It checks, after every command where it can and at a quiescent end:
// that every command is answered within a deadline (a hang prints a
// goroutine dump), with NO only where the protocol allows one; that
// each session sees UIDs strictly ascending, never reused, each naming
// the message the provider holds under it; that the provider was asked
// for no change no client asked for (a message removed or copied
// unasked is lost or duplicated) and for every change a client was told
// was made; that every folder as each session finally sees it is the
// provider's folder; and that the keyword each session keeps for itself
// ($sN) is, on every message, what that session last set on it, so that
// a flag update lost to a concurrent one shows.
//
// Seeds fix each session's commands, not the interleaving of sessions:
// a failure prints its seed, and ENGINE_SEED=n (or -seed=n) runs that
// seed again, often (not always) failing the same way. The environment:
//
//	ENGINE_SEEDS=n      run seeds 1..n (default defaultSeeds, 4)
//	ENGINE_SEED=n       run seed n only
//	ENGINE_KEEPGOING=1  run every seed, not stopping at the first failing
//	ENGINE_HISTORY=1    a failure lists every command, not the last 30
//	ENGINE_TRACE=1      a failure shows the end of each session's protocol
package enginetest
