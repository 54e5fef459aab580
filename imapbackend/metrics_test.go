package imapbackend_test

import (
	"fmt"
	"maps"
	"sync"
	"testing"
	"time"

	"github.com/emersion/go-imap/v2"

	"github.com/directbridge/directbridge/imapbackend"
	"github.com/directbridge/directbridge/sandbox"
)

// fakeMetrics records the IMAP front's metric events.
type fakeMetrics struct {
	mu       sync.Mutex
	open     int
	accepted int
	commands map[string]int // "NAME result"
	authFail map[string]int
	hits     int
	misses   int
	turned   map[string]int
}

func newFakeMetrics() *fakeMetrics {
	return &fakeMetrics{commands: map[string]int{}, authFail: map[string]int{}}
}

func (m *fakeMetrics) ConnOpened() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.open++
	m.accepted++
}

func (m *fakeMetrics) ConnClosed() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.open--
}

func (m *fakeMetrics) Command(name, result string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.commands[name+" "+result]++
}

func (m *fakeMetrics) AuthFailed(reason string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.authFail[reason]++
}

func (m *fakeMetrics) TurnedAway(reason string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.turned == nil {
		m.turned = map[string]int{}
	}
	m.turned[reason]++
}

func (m *fakeMetrics) PeerMessages(string, int) {}
func (m *fakeMetrics) Directed(string)          {}

func (m *fakeMetrics) CacheLookup(hit bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if hit {
		m.hits++
	} else {
		m.misses++
	}
}

// metricsSnapshot is a copy of fakeMetrics' counters.
type metricsSnapshot struct {
	open, accepted int
	commands       map[string]int
	authFail       map[string]int
	hits, misses   int
}

func (m *fakeMetrics) snapshot() metricsSnapshot {
	m.mu.Lock()
	defer m.mu.Unlock()
	return metricsSnapshot{open: m.open, accepted: m.accepted, commands: maps.Clone(m.commands),
		authFail: maps.Clone(m.authFail), hits: m.hits, misses: m.misses}
}

// TestMetrics: connections, command results, login failures and cache
// lookups reach Config.Metrics, with no user data in any argument.
func TestMetrics(t *testing.T) {
	fm := newFakeMetrics()
	e := newEnv(t, options{cfg: func(c *imapbackend.Config) { c.Metrics = fm }})
	e.deliver(alice, "INBOX", testMessage("metrics"))

	bad := e.dial()
	if err := bad.Login(alice, "wrong-password").Wait(); err == nil {
		t.Fatal("login with a wrong password succeeded")
	}
	bad.Close()

	c := e.login(alice, alicePW)
	if _, err := c.Select("INBOX", nil).Wait(); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Select("INBOX.NoSuchFolder", nil).Wait(); err == nil {
		t.Fatal("SELECT of a missing folder succeeded")
	}
	if _, err := c.Select("INBOX", &imap.SelectOptions{ReadOnly: true}).Wait(); err != nil {
		t.Fatal(err)
	}
	body := &imap.FetchItemBodySection{Peek: true}
	for i := 0; i < 2; i++ { // the second FETCH is served from the cache
		if _, err := c.Fetch(imap.SeqSetNum(1), &imap.FetchOptions{BodySection: []*imap.FetchItemBodySection{body}}).Collect(); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.UIDSearch(&imap.SearchCriteria{}, nil).Wait(); err != nil {
		t.Fatal(err)
	}
	if err := c.Logout().Wait(); err != nil {
		t.Fatal(err)
	}

	// The server side of a connection ends a moment after the client's.
	var s metricsSnapshot
	for deadline := time.Now().Add(5 * time.Second); ; {
		s = fm.snapshot()
		if s.open == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if s.accepted != 2 || s.open != 0 {
		t.Errorf("accepted %d, open %d; want 2 and 0", s.accepted, s.open)
	}
	for k, want := range map[string]int{
		"LOGIN no": 1, "LOGIN ok": 1, "SELECT ok": 1, "SELECT no": 1, "EXAMINE ok": 1,
		"FETCH ok": 2, "SEARCH ok": 1,
	} {
		if s.commands[k] != want {
			t.Errorf("commands[%q] = %d; want %d (all: %v)", k, s.commands[k], want, s.commands)
		}
	}
	if s.authFail["credentials"] != 1 || len(s.authFail) != 1 {
		t.Errorf("auth failures %v; want one for credentials", s.authFail)
	}
	if s.hits < 1 || s.misses < 1 {
		t.Errorf("cache hits %d, misses %d; want at least one of each", s.hits, s.misses)
	}
	for k := range s.commands {
		var name, result string
		fmt.Sscan(k, &name, &result)
		if result != "ok" && result != "no" && result != "bad" {
			t.Errorf("command %s has result %q", name, result)
		}
	}
}

// TestMetricsUnavailable: a login while the provider fails is an
// "unavailable" authentication failure, not a wrong password.
func TestMetricsUnavailable(t *testing.T) {
	fm := newFakeMetrics()
	e := newEnv(t, options{cfg: func(c *imapbackend.Config) { c.Metrics = fm }})
	e.sandbox.InjectFault("*", sandbox.Fault{Status: 503})
	c := e.dial()
	if err := c.Login(alice, alicePW).Wait(); err == nil {
		t.Fatal("login succeeded with the provider failing")
	}
	if s := fm.snapshot(); s.authFail["unavailable"] != 1 || s.authFail["credentials"] != 0 {
		t.Errorf("auth failures %v; want one unavailable", s.authFail)
	}
}
