package enginetest

import (
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"time"

	"github.com/emersion/go-imap/v2"
	"github.com/emersion/go-imap/v2/imapclient"
)

// session is one IMAP client: a connection of one user, a random walk of
// commands, and what it has seen.
type session struct {
	r    *run
	id   int
	user string
	kw   imap.Flag // the keyword only this session sets: $s<id>
	rng  *rand.Rand
	c    *imapclient.Client

	folder string    // selected; "" when none
	view   []viewMsg // the last LOOK, in sequence order
	// seen is every UID the session was shown, per folder, with its
	// model id: a UID names one message forever.
	seen map[string]map[imap.UID]string
	// own is what the session's keyword must be on the messages whose
	// state it alone decides (those it stored it on, or appended), with
	// the command that decided it; mid-run LOOKs are checked against it.
	own map[instKey]ownKeyword
	// final is the session's last LOOK of each folder, once the bridge
	// and the provider agree (final_test.go).
	final map[string][]viewMsg
	// trace is the end of the session's protocol exchange, kept with
	// ENGINE_TRACE=1 for the failure report.
	trace *logTail
}

// traceLines is how much of each session's exchange ENGINE_TRACE keeps.
const traceLines = 400

// viewMsg is one message of a LOOK.
type viewMsg struct {
	seq     uint32
	uid     imap.UID
	modelID string
	flags   []imap.Flag
}

// ownKeyword is the session's keyword on one message, as set by rec.
type ownKeyword struct {
	state kwState
	rec   *record
}

// keywordOf is the keyword only session n sets.
func keywordOf(n int) imap.Flag { return imap.Flag(fmt.Sprintf("$s%d", n)) }

func (r *run) newSession(id int, user string) *session {
	return &session{r: r, id: id, user: user, kw: keywordOf(id),
		rng:  rand.New(rand.NewPCG(r.seed, uint64(id)+1)),
		seen: map[string]map[imap.UID]string{}, own: map[instKey]ownKeyword{}, final: map[string][]viewMsg{}}
}

// connect logs in and selects the session's first folder.
func (s *session) connect() error {
	var opts *imapclient.Options
	if os.Getenv("ENGINE_TRACE") != "" {
		s.trace = newLogTail(traceLines)
		opts = &imapclient.Options{DebugWriter: s.trace}
	}
	c, err := imapclient.DialInsecure(s.r.addr, opts)
	if err != nil {
		return err
	}
	s.c = c
	s.r.addClient(c)
	if err := c.Login(s.user, password(s.user)).Wait(); err != nil {
		return fmt.Errorf("session %d: LOGIN: %w", s.id, err)
	}
	s.selectFolder(userFolders[s.rng.IntN(2)]) // INBOX or INBOX.Work
	s.look()
	return nil
}

// do sends one command and records it with its answer, under the
// deadline (watchdog_test.go).
func (s *session) do(rec *record, send func() error) {
	rec.sess, rec.user = s.id, s.user
	if rec.folder == "" {
		rec.folder = s.folder
	}
	f0 := s.r.p.FaultsInjected()
	rec.start, rec.t0 = s.r.p.Clock(), time.Now()
	i := s.r.model.begin(rec)
	stop := s.r.watch(rec.String())
	err := send()
	stop()
	rec.t1, rec.end = time.Now(), s.r.p.Clock()
	rec.faulted = s.r.p.FaultsInjected() != f0
	rec.err = err
	s.r.model.end(i, rec)
	s.r.checkOutcome(rec)
}

// steps are the commands a session draws from, with their weights.
var steps = []struct {
	weight int
	run    func(*session)
}{
	{14, (*session).appendMessage},
	{14, func(s *session) { s.storeFlag(s.kw, imap.StoreFlagsAdd) }},
	{7, func(s *session) { s.storeFlag(s.kw, imap.StoreFlagsDel) }},
	{5, func(s *session) { s.storeFlag(imap.FlagSeen, imap.StoreFlagsAdd) }},
	{4, func(s *session) { s.storeFlag(imap.FlagSeen, imap.StoreFlagsDel) }},
	{9, func(s *session) { s.fetchBodies(false) }},
	{4, func(s *session) { s.fetchBodies(true) }},
	{5, func(s *session) { s.transfer(false) }},
	{5, func(s *session) { s.transfer(true) }},
	{5, (*session).deleteSome},
	{4, func(s *session) { s.selectFolder(s.otherFolder(false)) }},
	{4, (*session).noop},
}

// step runs one random command and looks at the folder afterwards.
func (s *session) step() {
	if s.folder == "" {
		s.selectFolder(userFolders[s.rng.IntN(len(userFolders))])
	} else {
		total := 0
		for _, st := range steps {
			total += st.weight
		}
		n := s.rng.IntN(total)
		for _, st := range steps {
			if n -= st.weight; n < 0 {
				st.run(s)
				break
			}
		}
	}
	if s.folder != "" {
		s.look()
	}
}

// pickUIDs chooses messages of the last LOOK to act on: one (often the
// first, so that sessions meet on it), all, or some.
func (s *session) pickUIDs() []imap.UID {
	if len(s.view) == 0 {
		return nil
	}
	var out []imap.UID
	switch n := s.rng.IntN(10); {
	case n < 2:
		out = []imap.UID{s.view[0].uid}
	case n < 4:
		out = []imap.UID{s.view[s.rng.IntN(len(s.view))].uid}
	case n < 7:
		for _, m := range s.view {
			out = append(out, m.uid)
		}
	default:
		for _, m := range s.view {
			if s.rng.IntN(2) == 0 {
				out = append(out, m.uid)
			}
		}
		if len(out) == 0 {
			out = []imap.UID{s.view[s.rng.IntN(len(s.view))].uid}
		}
	}
	slices.Sort(out)
	return out
}

// otherFolder chooses a folder of the user other than the selected one:
// for COPY and MOVE (move true) INBOX or INBOX.Work only, since the
// bridge treats copies into the Trash specially.
func (s *session) otherFolder(move bool) string {
	choices := userFolders
	if move {
		choices = userFolders[:2]
	}
	for {
		f := choices[s.rng.IntN(len(choices))]
		if f != s.folder {
			return f
		}
	}
}

// learn notes what the session's own keyword is on a message now.
func (s *session) learn(k instKey, st kwState, rec *record) {
	s.own[k] = ownKeyword{st, rec}
}

func present(b bool) kwState {
	if b {
		return kwPresent
	}
	return kwAbsent
}
