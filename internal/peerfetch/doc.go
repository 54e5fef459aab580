// Package peerfetch lets replicas of the bridge (issue 21) take the
// messages another replica holds in memory from it, instead of
// downloading them from the provider again.
//
// A message a client appends through replica A is in A's raw-message
// cache, with the metadata A made of it; A tells the others it was added
// (internal/mailstore, peers.go), and says that it holds it. A client of
// replica B that fetches the message a moment later used to cost B two
// provider calls (its metadata, its bytes): under imaptest's stress with
// the clients split over two replicas, each replica downloaded ten times
// as many messages as one replica alone did, and the provider saw more
// than one bridge. With this package B asks A first, and the provider
// only for what A no longer holds, or when A does not answer within
// Timeout.
//
// What travels is health data, between machines of the operator's
// network that may not encrypt it: every request and answer is sealed
// with AES-256-GCM under a key derived from the journal key the replicas
// already share (DIRECTBRIDGE_JOURNAL_KEY; HKDF-SHA256, its own label),
// so that only a replica of the same cluster can ask, or read an answer.
// An answer is bound to its request (its nonce is the answer's additional
// data), and a request carries its time, so that one recorded cannot be
// replayed later than MaxSkew. A replica serves only what is in its
// memory: a request never becomes a provider call, and nothing is
// written to disk.
package peerfetch
