package smtpbackend_test

import (
	"sync"
	"testing"
	"time"

	"github.com/emersion/go-sasl"

	"github.com/directbridge/directbridge/sandbox"
	"github.com/directbridge/directbridge/smtpbackend"
)

// fakeMetrics records the SMTP front's metric events.
type fakeMetrics struct {
	mu       sync.Mutex
	open     int
	accepted int
	commands map[string]int // "NAME result"
	authFail map[string]int
	messages map[string]int
	turned   map[string]int
}

var _ smtpbackend.Metrics = (*fakeMetrics)(nil)

func newFakeMetrics() *fakeMetrics {
	return &fakeMetrics{commands: map[string]int{}, authFail: map[string]int{}, messages: map[string]int{}}
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

func (m *fakeMetrics) Message(result string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.messages[result]++
}

// get reads one counter: "open", "accepted", "cmd NAME result",
// "auth reason" or "msg result".
func (m *fakeMetrics) get(kind, key string) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	switch kind {
	case "open":
		return m.open
	case "accepted":
		return m.accepted
	case "cmd":
		return m.commands[key]
	case "auth":
		return m.authFail[key]
	default:
		return m.messages[key]
	}
}

// TestMetrics: connections (counted once across STARTTLS), command
// replies, authentication failures and message results reach
// Config.Metrics.
func TestMetrics(t *testing.T) {
	fm := newFakeMetrics()
	h := newHarness(t, func(c *smtpbackend.Config) { c.Metrics = fm })

	// A wrong password.
	c := h.dialStartTLS(t)
	if err := c.Auth(sasl.NewPlainClient("", aliceAddr, "wrong")); err == nil {
		t.Fatal("AUTH with a wrong password succeeded")
	}
	c.Close()

	// Over STARTTLS: one message sent, one refused (From is not the
	// sender), a refused MAIL FROM.
	c = h.login(t, aliceAddr)
	mustSubmit(t, c, aliceAddr, []string{bobAddr}, simple(h.subject("metrics"), "hello"))
	if _, err := submit(c, aliceAddr, []string{bobAddr}, message([]string{"From: " + carolAddr, "To: " + bobAddr, "Subject: x"}, "x")); err == nil {
		t.Fatal("a message from someone else was accepted")
	}
	if err := c.Mail(carolAddr, nil); err == nil {
		t.Fatal("MAIL FROM another address was accepted")
	}
	c.Reset()
	// The provider failing: a temporary failure.
	h.sb.InjectFault("Send", sandbox.Fault{Reset: true, Times: 1})
	if _, err := submit(c, aliceAddr, []string{bobAddr}, simple(h.subject("metrics"), "again")); err == nil {
		t.Fatal("a send the provider dropped was accepted")
	}
	c.Quit()

	// Over implicit TLS.
	c = h.dialTLS(t)
	if err := c.Auth(sasl.NewPlainClient("", bobAddr, passwords[bobAddr])); err != nil {
		t.Fatal(err)
	}
	mustSubmit(t, c, bobAddr, []string{aliceAddr}, message([]string{"From: " + bobAddr, "To: " + aliceAddr, "Subject: " + h.subject("metrics")}, "hi"))
	c.Quit()

	deadline := time.Now().Add(5 * time.Second)
	for fm.get("open", "") != 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	for _, tc := range []struct {
		kind, key string
		want      int
	}{
		{"accepted", "", 3},
		{"open", "", 0},
		{"cmd", "AUTH permanent", 1},
		{"cmd", "AUTH ok", 2},
		{"cmd", "MAIL ok", 4},
		{"cmd", "MAIL permanent", 1},
		{"cmd", "RCPT ok", 4},
		{"cmd", "DATA ok", 2},
		{"cmd", "DATA permanent", 1},
		{"cmd", "DATA temporary", 1},
		{"auth", "credentials", 1},
		{"auth", "unavailable", 0},
		{"msg", "sent", 2},
		{"msg", "refused", 1},
		{"msg", "temporary", 1},
	} {
		if got := fm.get(tc.kind, tc.key); got != tc.want {
			t.Errorf("%s %q = %d; want %d", tc.kind, tc.key, got, tc.want)
		}
	}
}
