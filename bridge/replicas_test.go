package bridge_test

import (
	"context"
	"crypto/tls"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/emersion/go-imap/v2"
	"github.com/emersion/go-imap/v2/imapclient"

	"github.com/directbridge/directbridge/bridge"
	"github.com/directbridge/directbridge/internal/cluster"
	"github.com/directbridge/directbridge/internal/pgtest"
	"github.com/directbridge/directbridge/sandbox"
	"github.com/directbridge/directbridge/upstream/directapi"
)

// replica is one bridge of a two-replica test, with the provider calls
// it made (counted at its own door to the shared sandbox).
type replica struct {
	b     *bridge.Bridge
	stop  func() error
	calls atomic.Int64
	raws  atomic.Int64 // GetRawMessagesByUIDs among calls
}

// twoReplicas starts one sandbox and two bridges on one PostgreSQL
// state store, each reaching the sandbox through its own counting door.
func twoReplicas(t *testing.T, poll time.Duration, mod ...func(*bridge.Config)) (*sandbox.Server, [2]*replica) {
	t.Helper()
	url := pgtest.Database(t)
	sb, err := sandbox.Open(sandbox.Options{Dir: t.TempDir(), Users: []sandbox.Account{{Name: "alice@direct.example", Password: "pw-alice"}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sb.Close() })
	var rs [2]*replica
	for i := range rs {
		r := &replica{}
		door := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
			r.calls.Add(1)
			if strings.Contains(req.URL.Path, "GetRawMessagesByUIDs") {
				r.raws.Add(1)
			}
			sb.ServeHTTP(w, req)
		}))
		t.Cleanup(door.Close)
		cfg := testConfig(t)
		cfg.StateURL = url
		cfg.APIURL = door.URL
		cfg.APIRateLimit = "unlimited"
		cfg.PollInterval = poll
		for _, f := range mod {
			f(&cfg)
		}
		r.b, err = bridge.New(cfg, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		r.stop = startBridge(t, r.b)
		rs[i] = r
	}
	return sb, rs
}

// dialReplica logs alice in through r, with unilateral responses sent to
// h (nil: none).
func dialReplica(t *testing.T, r *replica, h *imapclient.UnilateralDataHandler) *imapclient.Client {
	t.Helper()
	opts := &imapclient.Options{TLSConfig: &tls.Config{InsecureSkipVerify: true}}
	if h != nil {
		opts.UnilateralDataHandler = h
	}
	c, err := imapclient.DialStartTLS(r.b.Addr("IMAP (STARTTLS)"), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if err := c.Login("alice@direct.example", "pw-alice").Wait(); err != nil {
		t.Fatal(err)
	}
	return c
}

// seen collects what an IDLE client was told.
type seen struct {
	mu       sync.Mutex
	exists   uint32
	expunged int
	flags    map[uint32][]imap.Flag // by sequence number
	changed  chan struct{}
}

func newSeen() *seen {
	return &seen{flags: map[uint32][]imap.Flag{}, changed: make(chan struct{}, 100)}
}

func (s *seen) handler() *imapclient.UnilateralDataHandler {
	note := func() {
		select {
		case s.changed <- struct{}{}:
		default:
		}
	}
	return &imapclient.UnilateralDataHandler{
		Mailbox: func(d *imapclient.UnilateralDataMailbox) {
			if d.NumMessages != nil {
				s.mu.Lock()
				s.exists = *d.NumMessages
				s.mu.Unlock()
				note()
			}
		},
		Expunge: func(seq uint32) {
			s.mu.Lock()
			s.expunged++
			s.mu.Unlock()
			note()
		},
		Fetch: func(msg *imapclient.FetchMessageData) {
			buf, err := msg.Collect()
			if err != nil {
				return
			}
			s.mu.Lock()
			s.flags[msg.SeqNum] = buf.Flags
			s.mu.Unlock()
			note()
		},
	}
}

// wait waits up to d for ok, checked at every unilateral response.
func (s *seen) wait(t *testing.T, d time.Duration, what string, ok func(*seen) bool) time.Duration {
	t.Helper()
	start := time.Now()
	end := time.NewTimer(d)
	defer end.Stop()
	for {
		s.mu.Lock()
		done := ok(s)
		s.mu.Unlock()
		if done {
			return time.Since(start)
		}
		select {
		case <-s.changed:
		case <-end.C:
			t.Fatalf("not seen within %v: %s", d, what)
		}
	}
}

func hasFlag(fl []imap.Flag, f imap.Flag) bool {
	for _, x := range fl {
		if strings.EqualFold(string(x), string(f)) {
			return true
		}
	}
	return false
}

// TestReplicasShareChanges: a change made through replica A (APPEND with
// flags, STORE, EXPUNGE) reaches an IDLE client on replica B within a
// second, with no provider call by B, and both replicas number the folder
// alike. Polls are an hour apart: only the messages between replicas
// can carry the changes.
func TestReplicasShareChanges(t *testing.T) {
	_, rs := twoReplicas(t, time.Hour)
	ca := dialReplica(t, rs[0], nil)
	s := newSeen()
	cb := dialReplica(t, rs[1], s.handler())
	da, err := ca.Select("INBOX", nil).Wait()
	if err != nil {
		t.Fatal(err)
	}
	db, err := cb.Select("INBOX", nil).Wait()
	if err != nil {
		t.Fatal(err)
	}
	if da.UIDValidity != db.UIDValidity || da.UIDNext != db.UIDNext || da.NumMessages != db.NumMessages {
		t.Fatalf("INBOX through A: %d/%d/%d, through B: %d/%d/%d (UIDVALIDITY/UIDNEXT/EXISTS)",
			da.UIDValidity, da.UIDNext, da.NumMessages, db.UIDValidity, db.UIDNext, db.NumMessages)
	}
	n := db.NumMessages
	idle, err := cb.Idle()
	if err != nil {
		t.Fatal(err)
	}
	before := rs[1].calls.Load()

	raw := "From: bob@direct.example\r\nTo: alice@direct.example\r\nSubject: replica\r\nMessage-ID: <replica-1@direct.example>\r\n\r\nhello\r\n"
	app := ca.Append("INBOX", int64(len(raw)), &imap.AppendOptions{Flags: []imap.Flag{"$Label1", imap.FlagSeen}})
	app.Write([]byte(raw))
	app.Close()
	ad, err := app.Wait()
	if err != nil {
		t.Fatal(err)
	}
	took := s.wait(t, 3*time.Second, "EXISTS for the APPEND through A", func(s *seen) bool { return s.exists == n+1 })
	if took > time.Second {
		t.Errorf("the APPEND through A reached B's IDLE client in %v, want <= 1 s", took)
	}
	uid := imap.UIDSetNum(ad.UID)
	if err := ca.Store(uid, &imap.StoreFlags{Op: imap.StoreFlagsAdd, Flags: []imap.Flag{"$Label2"}, Silent: true}, nil).Close(); err != nil {
		t.Fatal(err)
	}
	s.wait(t, 3*time.Second, "FETCH FLAGS with $Label2", func(s *seen) bool {
		fl := s.flags[n+1]
		return hasFlag(fl, "$Label1") && hasFlag(fl, "$Label2") && hasFlag(fl, imap.FlagSeen)
	})
	if err := ca.Store(uid, &imap.StoreFlags{Op: imap.StoreFlagsDel, Flags: []imap.Flag{imap.FlagSeen}, Silent: true}, nil).Close(); err != nil {
		t.Fatal(err)
	}
	s.wait(t, 3*time.Second, "FETCH FLAGS without \\Seen", func(s *seen) bool {
		fl := s.flags[n+1]
		return !hasFlag(fl, imap.FlagSeen) && hasFlag(fl, "$Label2")
	})
	if err := ca.Store(uid, &imap.StoreFlags{Op: imap.StoreFlagsAdd, Flags: []imap.Flag{imap.FlagDeleted}, Silent: true}, nil).Close(); err != nil {
		t.Fatal(err)
	}
	if err := ca.UIDExpunge(uid).Close(); err != nil {
		t.Fatal(err)
	}
	s.wait(t, 3*time.Second, "EXPUNGE", func(s *seen) bool { return s.expunged == 1 })
	if got := rs[1].calls.Load() - before; got != 0 {
		t.Errorf("replica B made %d provider calls to show A's changes, want 0", got)
	}
	if err := idle.Close(); err != nil {
		t.Fatal(err)
	}
	if err := idle.Wait(); err != nil {
		t.Fatal(err)
	}
	// The other way: a keyword set through B shows through A.
	raw2 := strings.Replace(raw, "replica-1", "replica-2", 1)
	app = ca.Append("INBOX", int64(len(raw2)), nil)
	app.Write([]byte(raw2))
	app.Close()
	ad, err = app.Wait()
	if err != nil {
		t.Fatal(err)
	}
	// B shows it once A's message arrives (NOOP reports it).
	for end := time.Now().Add(3 * time.Second); ; {
		msgs, err := cb.Fetch(imap.UIDSetNum(ad.UID), &imap.FetchOptions{Flags: true}).Collect()
		if err != nil {
			t.Fatal(err)
		}
		if len(msgs) == 1 {
			break
		}
		if time.Now().After(end) {
			t.Fatal("B does not show the message appended through A")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := cb.Store(imap.UIDSetNum(ad.UID), &imap.StoreFlags{Op: imap.StoreFlagsAdd, Flags: []imap.Flag{"$FromB"}, Silent: true}, nil).Close(); err != nil {
		t.Fatalf("STORE through B of a message A appended: %v", err)
	}
	deadline := time.Now().Add(3 * time.Second)
	for {
		msgs, err := ca.Fetch(imap.UIDSetNum(ad.UID), &imap.FetchOptions{Flags: true}).Collect()
		if err != nil {
			t.Fatal(err)
		}
		if len(msgs) == 1 && hasFlag(msgs[0].Flags, "$FromB") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("A does not show B's keyword: %v", msgs)
		}
		time.Sleep(50 * time.Millisecond)
	}
	sa, _ := ca.Status("INBOX", &imap.StatusOptions{UIDNext: true, UIDValidity: true, NumMessages: true}).Wait()
	sbd, _ := cb.Status("INBOX", &imap.StatusOptions{UIDNext: true, UIDValidity: true, NumMessages: true}).Wait()
	if sa == nil || sbd == nil || sa.UIDValidity != sbd.UIDValidity || sa.UIDNext != sbd.UIDNext || *sa.NumMessages != *sbd.NumMessages {
		t.Fatalf("STATUS through A %+v, through B %+v", sa, sbd)
	}
}

// TestReplicasPollOnce: a folder open through two replicas is polled by
// one of them (the lease), and new mail reaches the IDLE clients of
// both; when the polling replica stops, the other takes over.
func TestReplicasPollOnce(t *testing.T) {
	sb, rs := twoReplicas(t, time.Second)
	var sessions [2]*seen
	for i, r := range rs {
		sessions[i] = newSeen()
		c := dialReplica(t, r, sessions[i].handler())
		if _, err := c.Select("INBOX", nil).Wait(); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Idle(); err != nil {
			t.Fatal(err)
		}
	}
	// Quiet for a while: one replica polls, the other makes no call
	// (after the catch-up of the replica that joined last, at a
	// heartbeat interval from its start).
	time.Sleep(2500 * time.Millisecond)
	a0, b0 := rs[0].calls.Load(), rs[1].calls.Load()
	time.Sleep(5 * time.Second)
	da, db := rs[0].calls.Load()-a0, rs[1].calls.Load()-b0
	if (da == 0) == (db == 0) {
		t.Fatalf("provider calls in 5 s of polling: replica A %d, B %d; want one replica polling and the other silent", da, db)
	}
	if max(da, db) > 2*6 {
		t.Fatalf("%d calls in 5 s for one folder polled every second, want at most 12", max(da, db))
	}
	raw := []byte("From: bob@direct.example\r\nTo: alice@direct.example\r\nSubject: new\r\nMessage-ID: <poll-1@direct.example>\r\n\r\nhi\r\n")
	if _, err := sb.Deliver(context.Background(), "alice@direct.example", "INBOX", raw); err != nil {
		t.Fatal(err)
	}
	for i, s := range sessions {
		s.wait(t, 5*time.Second, "EXISTS for mail delivered at the provider on replica "+string(rune('A'+i)), func(s *seen) bool { return s.exists >= 1 })
	}
	// The poller stops: the other replica's poller takes the lease over.
	holder, other := 0, 1
	if db > da {
		holder, other = 1, 0
	}
	if err := rs[holder].stop(); err != nil && !errors.Is(err, context.Canceled) {
		t.Logf("stopping the polling replica: %v", err)
	}
	raw2 := []byte(strings.Replace(string(raw), "poll-1", "poll-2", 1))
	if _, err := sb.Deliver(context.Background(), "alice@direct.example", "INBOX", raw2); err != nil {
		t.Fatal(err)
	}
	sessions[other].wait(t, 8*time.Second, "EXISTS on the remaining replica after the poller stopped", func(s *seen) bool { return s.exists >= 2 })
}

// TestReplicasShareLoginFailures: the guessing slowdown holds for the
// whole cluster: failures through replica A refuse the address on B.
func TestReplicasShareLoginFailures(t *testing.T) {
	_, rs := twoReplicas(t, time.Hour, func(c *bridge.Config) {
		c.AuthFreeFailures, c.AuthRefuseAfter, c.AuthMaxDelay = 1, 3, time.Second
	})
	login := func(r *replica, pw string) error {
		c, err := imapclient.DialStartTLS(r.b.Addr("IMAP (STARTTLS)"), &imapclient.Options{TLSConfig: &tls.Config{InsecureSkipVerify: true}})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		return c.Login("alice@direct.example", pw).Wait()
	}
	for range 3 {
		if login(rs[0], "wrong") == nil {
			t.Fatal("a wrong password got in")
		}
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		err := login(rs[1], "pw-alice")
		if err != nil && strings.Contains(err.Error(), "UNAVAILABLE") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("replica B after 3 failures through A (refuse after 3): %v, want NO [UNAVAILABLE]", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestReplicasShareBodies: a message a client appends through replica A
// is fetched by a client of replica B from A's memory (internal/peerfetch),
// byte for byte, with no download from the provider; with the exchange
// off, B downloads it.
func TestReplicasShareBodies(t *testing.T) {
	key := strings.Repeat("ab", 32)
	for _, on := range []bool{true, false} {
		t.Run(map[bool]string{true: "exchange", false: "off"}[on], func(t *testing.T) {
			_, rs := twoReplicas(t, time.Hour, func(c *bridge.Config) {
				c.JournalKey = directapi.Secret(key)
				c.MetricsAddr = "127.0.0.1:0"
				if on {
					c.PeerAddr = "127.0.0.1:0"
				}
				// Two replicas serving one user: what the exchange is for.
				c.Director = false
			})
			ca := dialReplica(t, rs[0], nil)
			s := newSeen()
			cb := dialReplica(t, rs[1], s.handler())
			if _, err := ca.Select("INBOX", nil).Wait(); err != nil {
				t.Fatal(err)
			}
			db, err := cb.Select("INBOX", nil).Wait()
			if err != nil {
				t.Fatal(err)
			}
			// B learns A's address from A's heartbeat.
			time.Sleep(cluster.HeartbeatInterval + 500*time.Millisecond)
			idle, err := cb.Idle()
			if err != nil {
				t.Fatal(err)
			}
			raw := "From: bob@direct.example\r\nTo: alice@direct.example\r\nSubject: held\r\nMessage-ID: <held-1@direct.example>\r\n\r\n" +
				strings.Repeat("a line of the referral letter\r\n", 200)
			app := ca.Append("INBOX", int64(len(raw)), nil)
			app.Write([]byte(raw))
			app.Close()
			ad, err := app.Wait()
			if err != nil {
				t.Fatal(err)
			}
			s.wait(t, 3*time.Second, "EXISTS for the APPEND through A", func(s *seen) bool { return s.exists == db.NumMessages+1 })
			if err := idle.Close(); err != nil {
				t.Fatal(err)
			}
			if err := idle.Wait(); err != nil {
				t.Fatal(err)
			}
			before := rs[1].raws.Load()
			body := &imap.FetchItemBodySection{Peek: true}
			msgs, err := cb.Fetch(imap.UIDSetNum(ad.UID), &imap.FetchOptions{BodySection: []*imap.FetchItemBodySection{body}, RFC822Size: true}).Collect()
			if err != nil {
				t.Fatal(err)
			}
			if len(msgs) != 1 || string(msgs[0].FindBodySection(body)) != raw || msgs[0].RFC822Size != int64(len(raw)) {
				t.Fatalf("B fetched %d messages; want the bytes A appended", len(msgs))
			}
			downloads := rs[1].raws.Load() - before
			if on && downloads != 0 {
				t.Errorf("B downloaded from the provider %d times a message A holds, want 0", downloads)
			}
			if !on && downloads != 1 {
				t.Errorf("with the exchange off B downloaded %d times, want 1", downloads)
			}
			_, scrape := httpGet(t, "http://"+rs[1].b.Addr(bridge.MetricsListener)+"/metrics")
			want := map[bool]string{true: `directbridge_imap_peer_messages_total{result="held"} 1`,
				false: `directbridge_imap_peer_messages_total{result="held"} 0`}[on]
			if !strings.Contains(scrape, want) {
				t.Errorf("B's metrics lack %s", want)
			}
		})
	}
}
