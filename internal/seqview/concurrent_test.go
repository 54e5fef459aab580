package seqview

import (
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/emersion/go-imap/v2"
)

// TestConcurrent lets the provider change the folder from several
// goroutines while sessions resolve, fetch, poll and idle; run with -race
// it checks the locking, and at the end every session agrees with the
// folder.
func TestConcurrent(t *testing.T) {
	mb := NewMailbox(Config{LogSize: 8})
	var next imap.UID
	var nextMu sync.Mutex
	const rounds = 300
	var writers, readers sync.WaitGroup
	stop := make(chan struct{})
	for w := range 3 {
		writers.Add(1)
		go func() {
			defer writers.Done()
			rng := rand.New(rand.NewPCG(uint64(w), 1))
			for range rounds {
				switch rng.IntN(3) {
				case 0:
					nextMu.Lock()
					next++
					err := mb.Add(NewMessage{UID: next, Flags: []imap.Flag{"$k" + imap.Flag(rune('a'+rng.IntN(5)))}})
					nextMu.Unlock()
					if err != nil {
						t.Error(err)
						return
					}
				case 1:
					if uids := mb.UIDs(); len(uids) > 0 {
						mb.Expunge(uids[rng.IntN(len(uids))])
					}
				case 2:
					if uids := mb.UIDs(); len(uids) > 0 {
						mb.SetFlags(nil, FlagChange{UID: uids[rng.IntN(len(uids))], Op: imap.StoreFlagsAdd, Flags: []imap.Flag{imap.FlagSeen}})
					}
				}
			}
		}()
	}
	views := make([]*View, 4)
	for i := range views {
		v, _, err := mb.Open(ViewOptions{ReadOnly: i == 3})
		if err != nil {
			t.Fatal(err)
		}
		views[i] = v
		readers.Add(1)
		go func() {
			defer readers.Done()
			rng := rand.New(rand.NewPCG(uint64(i), 2))
			for {
				select {
				case <-stop:
					return
				case <-v.Wait():
				}
				if n := v.NumMessages(); n > 0 {
					ts, err := v.Resolve(imap.SeqSet{{Start: 1, Stop: 0}})
					if err != nil || len(ts) != int(n) {
						t.Errorf("Resolve 1:* with %d messages: %d, %v", n, len(ts), err)
						return
					}
					v.FetchFlags(ts[0].UID, ts[len(ts)-1].UID)
					if rng.IntN(2) == 0 && ts[0].Live {
						mb.SetFlags(v, FlagChange{UID: ts[0].UID, Op: imap.StoreFlagsAdd, Flags: []imap.Flag{imap.FlagFlagged}})
						v.QueueFetch(ts[0].UID)
					}
				}
				if _, err := v.Updates(rng.IntN(3) > 0); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	writers.Wait()
	close(stop)
	readers.Wait()
	want := mb.UIDs()
	for i, v := range views {
		if _, err := v.Updates(true); err != nil {
			t.Fatal(err)
		}
		if int(v.NumMessages()) != len(want) {
			t.Fatalf("view %d has %d messages, folder %d", i, v.NumMessages(), len(want))
		}
		for j, u := range want {
			if got, _ := v.UIDOf(uint32(j) + 1); got != u {
				t.Fatalf("view %d: seq %d is UID %d, folder has %d", i, j+1, got, u)
			}
		}
		v.Close()
	}
}
