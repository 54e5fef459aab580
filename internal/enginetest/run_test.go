package enginetest

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/emersion/go-imap/v2/imapclient"

	"github.com/directbridge/directbridge/internal/fakeprovider"
	"github.com/directbridge/directbridge/upstream"
	"github.com/directbridge/directbridge/upstream/directapi"
)

// The two users, and the folders the sessions use (INBOX.Work is made
// before the bridge starts; INBOX.Trash is every mailbox's).
const (
	alice = "alice@direct.example"
	bob   = "bob@direct.example"
)

var (
	users       = []string{alice, bob}
	userFolders = []string{"INBOX", "INBOX.Work", "INBOX.Trash"}
)

func password(user string) string { return "pw-" + user }

// params are what a seed decides besides the commands.
type params struct {
	sessions int
	steps    int // per session
	poll     time.Duration
	// budget, when not 0, paces the polls as a provider budget does:
	// most polls peek (mailstore/peek.go), a full refresh every second
	// or so. Drawn from poll (odd milliseconds), so that seeds drawn
	// before it keep their commands.
	budget  float64
	latency fakeprovider.Latency
	faults  fakeprovider.Faults
}

func drawParams(rng *rand.Rand) params {
	p := params{
		sessions: 4 + rng.IntN(3),
		steps:    15 + rng.IntN(15),
		poll:     time.Duration(50+rng.IntN(100)) * time.Millisecond,
		latency:  fakeprovider.Latency{Max: time.Duration(rng.IntN(3)) * time.Millisecond},
	}
	if rng.IntN(3) == 0 {
		p.faults = fakeprovider.Faults{Unavailable: 0.02, LostAnswer: 0.02}
	}
	if p.poll/time.Millisecond%2 == 1 {
		p.budget = 400
	}
	return p
}

func (p params) String() string {
	return fmt.Sprintf("%d sessions of %d steps, poll %v, budget %g/s, latency up to %v, faults %+v",
		p.sessions, p.steps, p.poll, p.budget, p.latency.Max, p.faults)
}

// run is one seed's run.
type run struct {
	t      *testing.T
	seed   uint64
	params params
	p      *fakeprovider.Provider
	addr   string
	logs   *logTail
	model  model

	sessions []*session
	nextID   atomic.Int64 // model ids

	lin struct {
		sync.Mutex
		l *lineage
	}

	stopping atomic.Bool // a failure stops the sessions
	hung     atomic.Bool // a command passed its deadline

	mu       sync.Mutex
	validity map[string]uint32 // user and folder to the UIDVALIDITY seen
	failures []string
	clients  []*imapclient.Client // every connection, to close at the end
}

// addClient notes a connection to close at the end.
func (r *run) addClient(c *imapclient.Client) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.clients = append(r.clients, c)
}

// closeClients closes every connection: a command waiting for its answer
// returns.
func (r *run) closeClients() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, c := range r.clients {
		c.Close()
	}
}

// runSeed runs one seed: the setup, the sessions and the other client
// at once, then the quiet end and the checks that need it.
func runSeed(t *testing.T, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 0x9e3779b97f4a7c15))
	r := &run{t: t, seed: seed, params: drawParams(rng), logs: newLogTail(60), validity: map[string]uint32{}}
	r.lin.l = newLineage()
	r.p = fakeprovider.New(fakeprovider.Options{Users: map[string]string{alice: password(alice), bob: password(bob)},
		Seed: seed, Latency: r.params.latency})
	setup := r.setUp(rng)
	addr, stop := startBridge(t, r.p, r.params.poll, r.params.budget, slog.New(slog.NewTextHandler(r.logs, nil)))
	r.addr = addr
	defer func() {
		stop()
		r.closeClients()
		r.report()
	}()

	for i := range r.params.sessions {
		user := users[min(i, 2)%2] // alice, bob, alice, then either
		if i > 2 {
			user = users[rng.IntN(2)]
		}
		r.sessions = append(r.sessions, r.newSession(i+1, user))
	}
	for _, s := range r.sessions {
		if err := s.connect(); err != nil {
			r.fail("%v", err)
			return
		}
	}

	r.p.SetFaults(r.params.faults)
	done := make(chan struct{})
	var other sync.WaitGroup
	other.Add(1)
	go func() {
		defer other.Done()
		r.otherClient(rand.New(rand.NewPCG(seed, 0)), done)
	}()
	var wg sync.WaitGroup
	for _, s := range r.sessions {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range r.params.steps {
				if r.stopping.Load() {
					return
				}
				s.step()
			}
		}()
	}
	wg.Wait()
	close(done)
	other.Wait()
	r.p.SetFaults(fakeprovider.Faults{})
	if r.stopping.Load() {
		return
	}

	// The quiet end: nothing changes any more but what the bridge
	// still has to do.
	r.quietEnd()
	if r.stopping.Load() {
		return
	}
	r.withLineage(func(l *lineage) {
		journal := r.p.Journal()
		l.apply(journal) // what came since withLineage read it
		r.checkJournal(l, journal, setup)
		r.checkAppendedSeen(l)
		r.checkFinalKeywords(l)
	})
	for _, s := range r.sessions {
		s.c.Logout().Wait()
	}
}

// setUp makes INBOX.Work and a few messages in each user's folders, and
// returns the provider's clock after it.
func (r *run) setUp(rng *rand.Rand) int64 {
	ctx := context.Background()
	for _, u := range users {
		auth := upstream.Auth{Username: u, Password: directapi.Secret(password(u))}
		if err := r.p.CreateFolder(ctx, auth, "INBOX.Work"); err != nil {
			r.t.Fatal(err)
		}
		for _, f := range userFolders[:2] {
			for range 2 + rng.IntN(4) {
				if _, err := r.p.Deliver(u, f, newMessage(r.newModelID(), rng)); err != nil {
					r.t.Fatal(err)
				}
			}
		}
	}
	return r.p.Clock()
}

// newModelID names a new message.
func (r *run) newModelID() string {
	return fmt.Sprintf("%d.%d", r.seed, r.nextID.Add(1))
}

// withLineage runs f with the lineage brought up to the provider's
// journal as it is now.
func (r *run) withLineage(f func(*lineage)) {
	r.lin.Lock()
	defer r.lin.Unlock()
	r.lin.l.apply(r.p.Journal())
	f(r.lin.l)
}

// maxFailures bounds the failures a run reports: the first tells most.
const maxFailures = 8

// fail records a failure and stops the sessions (safe from any
// goroutine).
func (r *run) fail(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.failLocked(format, args...)
}

func (r *run) failLocked(format string, args ...any) {
	r.stopping.Store(true)
	if len(r.failures) < maxFailures {
		r.failures = append(r.failures, fmt.Sprintf(format, args...))
	}
}

// report fails the test with the seed, the failures, the last commands
// and the bridge's last log lines.
func (r *run) report() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.failures) == 0 {
		return
	}
	var b strings.Builder
	fmt.Fprintf(&b, "seed %d (%v) failed; replay with ENGINE_SEED=%d go test ./internal/enginetest -run TestEngineModel -v\n",
		r.seed, r.params, r.seed)
	for i, f := range r.failures {
		fmt.Fprintf(&b, "\nfailure %d: %s\n", i+1, f)
	}
	recs := r.model.all()
	shown := recs[max(0, len(recs)-30):]
	if os.Getenv("ENGINE_HISTORY") != "" {
		shown = recs
	}
	fmt.Fprintf(&b, "\nthe last commands answered (of %d; ENGINE_HISTORY=1 shows all):\n", len(recs))
	for _, rec := range shown {
		fmt.Fprintf(&b, "  %v\n", rec)
	}
	fmt.Fprintf(&b, "\nthe bridge's last log lines:\n%s", r.logs)
	for _, s := range r.sessions {
		if s.trace != nil {
			fmt.Fprintf(&b, "\nsession %d's protocol exchange, its end (ENGINE_TRACE):\n%s", s.id, s.trace)
		}
	}
	r.t.Error(b.String())
}

// logTail keeps the last lines the bridge logged.
type logTail struct {
	mu    sync.Mutex
	max   int
	lines []string
}

func newLogTail(n int) *logTail { return &logTail{max: n} }

func (l *logTail) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, line := range strings.Split(strings.TrimRight(string(p), "\n"), "\n") {
		l.lines = append(l.lines, line)
	}
	if len(l.lines) > l.max {
		l.lines = l.lines[len(l.lines)-l.max:]
	}
	return len(p), nil
}

func (l *logTail) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var b strings.Builder
	for _, line := range l.lines {
		b.WriteString("  " + line + "\n")
	}
	return b.String()
}
