package enginetest

import (
	"math/rand/v2"
	"time"
)

// otherClient acts on the mailboxes at the provider behind the bridge's
// back until done closes, as mail arriving and another client of the
// same mailboxes (a phone, webmail) would: it delivers messages, removes
// some (often the newest, which may be one a session just appended and
// the bridge has yet to mark read), and reads some.
func (r *run) otherClient(rng *rand.Rand, done <-chan struct{}) {
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-done:
			return
		case <-t.C:
		}
		t.Reset(time.Duration(2+rng.IntN(20)) * time.Millisecond)
		user := users[rng.IntN(len(users))]
		switch n := rng.IntN(100); {
		case n < 40:
			folder := userFolders[0]
			if rng.IntN(10) < 3 {
				folder = userFolders[1]
			}
			if _, err := r.p.Deliver(user, folder, newMessage(r.newModelID(), rng)); err != nil {
				r.fail("other client: delivering: %v", err)
			}
		case n < 85:
			folder := userFolders[rng.IntN(len(userFolders))]
			snap, err := r.p.Snapshot(user, folder)
			if err != nil || len(snap.Messages) == 0 {
				continue
			}
			m := snap.Messages[len(snap.Messages)-1]
			if rng.IntN(2) == 0 {
				m = snap.Messages[rng.IntN(len(snap.Messages))]
			}
			r.p.Remove(user, folder, m.UID) // may be gone already: no matter
		default:
			folder := userFolders[rng.IntN(2)]
			snap, err := r.p.Snapshot(user, folder)
			if err != nil {
				continue
			}
			var unread []int64
			for _, m := range snap.Messages {
				if !m.Read {
					unread = append(unread, m.UID)
				}
			}
			if len(unread) > 0 {
				r.p.SetReadBehind(user, folder, unread[rng.IntN(len(unread))], true)
			}
		}
	}
}
