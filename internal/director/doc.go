// Package director serves each user's IMAP sessions on one replica of the
// bridge (issue 21), whichever replica the balancer gave the connection
// to, as Dovecot's director and proxy do.
//
// Every replica keeps its own mirror of the folders its clients have
// open (internal/mailstore). When the balancer splits one user's
// connections over two replicas, both mirror the same folders: each
// loads the metadata of what the other appended, lists the folder when
// the other's UIDs run ahead, and retries changes on messages the other
// just expunged. Under imaptest's stress that made two replicas serve
// 0.52-0.68x of what one replica serves alone. With the director, the
// replica that accepts a connection does the part before LOGIN itself
// (imapbackend's front: greeting, CAPABILITY, STARTTLS, LOGIN and
// AUTHENTICATE, and the check of the password), and then hands the
// connection to the user's home replica, chosen by rendezvous hashing
// over the live replicas (Home), which serves it as if the client had
// logged in there. The connection's bytes then pass through the
// accepting replica unchanged.
//
// The link between replicas carries passwords and health data over a
// network that may not encrypt it: it is TLS 1.3 with both sides
// proving they hold a key derived from the journal key the replicas
// already share (DIRECTBRIDGE_JOURNAL_KEY; HKDF-SHA256, its own label),
// so that only a replica of the same cluster can open a link or accept
// one. The link's first line (Hello) names the user, the password the
// home needs for the provider's API (kept in memory only, as for any
// session), and the client's address, for the home's logs and limits.
// The home answers with its IMAP greeting: PREAUTH when it took the
// session, BYE with the reason when it did not.
//
// Nothing here is needed for correctness: a replica that is not a home
// serves a user as well, only at the cost of a second mirror. When the
// home does not answer, the accepting replica serves the connection
// itself; while replicas come and go, a user's connections may be
// served by two replicas for a moment.
package director
