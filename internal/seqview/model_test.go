package seqview

import (
	"flag"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/emersion/go-imap/v2"
)

// The model-based test drives a Mailbox with random operations from the
// provider and from several sessions, and keeps two models independent of
// the package: the folder as it truly is, and each session's client,
// which learns only from the responses it is given, as a real client
// does (EXPUNGE n removes the nth, EXISTS n extends, FETCH sets flags,
// FLAGS sets the keyword list). After every response and every step the
// client models are checked against the folder model.

// flagPool is what random flag operations draw from: system flags in odd
// spellings, registered keywords and free keywords.
var flagPool = []imap.Flag{`\Seen`, `\seen`, `\Flagged`, `\Deleted`, `\Answered`, `\DRAFT`, `$junk`, `$Forwarded`,
	`$Work`, `$Later`, `todo`, `Project-X`, `\Recent`}

// modelCanon is the model's own canonical form: system flags and the
// registered keywords spelled by a fixed table, \Recent dropped, sorted.
func modelCanon(fl []imap.Flag) []imap.Flag {
	table := map[string]imap.Flag{`\seen`: `\Seen`, `\flagged`: `\Flagged`, `\deleted`: `\Deleted`,
		`\answered`: `\Answered`, `\draft`: `\Draft`, `$junk`: `$Junk`, `$forwarded`: `$Forwarded`}
	seen := map[string]bool{}
	var out []imap.Flag
	for _, f := range fl {
		low := strings.ToLower(string(f))
		if low == `\recent` || seen[low] {
			continue
		}
		seen[low] = true
		if c, ok := table[low]; ok {
			f = c
		}
		out = append(out, f)
	}
	slices.Sort(out)
	return out
}

func modelOp(cur []imap.Flag, op imap.StoreFlagsOp, fl []imap.Flag) []imap.Flag {
	fl = modelCanon(fl)
	switch op {
	case imap.StoreFlagsAdd:
		return modelCanon(append(slices.Clone(cur), fl...))
	case imap.StoreFlagsDel:
		return slices.DeleteFunc(slices.Clone(cur), func(f imap.Flag) bool { return slices.Contains(fl, f) })
	}
	return fl
}

var modelBase = map[imap.Flag]bool{`\Seen`: true, `\Answered`: true, `\Flagged`: true, `\Deleted`: true, `\Draft`: true}

// folderModel is the truth.
type folderModel struct {
	live       []imap.UID
	flags      map[imap.UID][]imap.Flag // live messages, and the last flags of expunged ones
	expunged   map[imap.UID]bool
	next       imap.UID
	recentFrom imap.UID
	takenBy    map[imap.UID]int // the read-write session that got \Recent
	sessions   int              // sessions opened so far
}

// clientModel is what one session's client knows.
type clientModel struct {
	id        int
	sess      int // numbers this session (this SELECT) among all
	rev2      bool
	v         *View
	readOnly  bool
	list      []imap.UID
	flags     map[imap.UID][]imap.Flag // without \Recent
	recentIn  map[imap.UID]bool        // \Recent as the client saw it
	expRecent map[imap.UID]bool        // \Recent as the folder model says it must be
	announced []imap.Flag              // last FLAGS
	selected  bool
}

type modelRun struct {
	t       *testing.T
	rng     *rand.Rand
	mb      *Mailbox
	f       *folderModel
	clients []*clientModel
	step    int
	op      string
}

func (r *modelRun) fatalf(format string, args ...any) {
	r.t.Helper()
	r.t.Fatalf("step %d (%s): %s", r.step, r.op, fmt.Sprintf(format, args...))
}

func (r *modelRun) randFlags() []imap.Flag {
	var out []imap.Flag
	for range r.rng.IntN(4) {
		out = append(out, flagPool[r.rng.IntN(len(flagPool))])
	}
	return out
}

// tellNew records that client c has just been told of message u (SELECT
// or EXISTS): RFC 3501 §2.3.2 decides whether it is \Recent there.
func (r *modelRun) tellNew(c *clientModel, u imap.UID) {
	if u < r.f.recentFrom {
		return
	}
	if _, taken := r.f.takenBy[u]; taken {
		return
	}
	c.expRecent[u] = true
	if !c.readOnly {
		r.f.takenBy[u] = c.sess
	}
}

// fetched checks and applies a FETCH (UID FLAGS) given to client c.
func (r *modelRun) fetched(c *clientModel, seq uint32, uid imap.UID, flags []imap.Flag, complete bool) {
	r.t.Helper()
	if seq == 0 || int(seq) > len(c.list) {
		r.fatalf("client %d: FETCH %d with %d messages", c.id, seq, len(c.list))
	}
	if c.list[seq-1] != uid {
		r.fatalf("client %d: FETCH %d says UID %d, client has %d there", c.id, seq, uid, c.list[seq-1])
	}
	var stored []imap.Flag
	recent := false
	for _, f := range flags {
		switch {
		case f == FlagRecent:
			recent = true
		case modelBase[f]:
			stored = append(stored, f)
		default:
			if !slices.Contains(c.announced, f) {
				r.fatalf("client %d: FETCH %d shows keyword %s, not in FLAGS %v", c.id, seq, f, c.announced)
			}
			stored = append(stored, f)
		}
	}
	if recent && (c.rev2 || !c.expRecent[uid]) || !recent && !c.rev2 && c.expRecent[uid] {
		r.fatalf("client %d: FETCH %d UID %d \\Recent=%v, want %v", c.id, seq, uid, recent, c.expRecent[uid] && !c.rev2)
	}
	if recent && !c.readOnly {
		for _, o := range r.clients {
			if o != c && !o.readOnly && o.recentIn[uid] {
				r.fatalf("UID %d \\Recent in read-write clients %d and %d", uid, o.id, c.id)
			}
		}
	}
	c.recentIn[uid] = recent
	want := r.f.flags[uid]
	if complete && !slices.Equal(modelCanon(stored), want) {
		r.fatalf("client %d: FETCH %d UID %d FLAGS %v, folder has %v", c.id, seq, uid, stored, want)
	}
	if !complete {
		// Keywords not announced yet may be left out, nothing else.
		var known []imap.Flag
		for _, f := range want {
			if modelBase[f] || slices.Contains(c.announced, f) {
				known = append(known, f)
			}
		}
		if !slices.Equal(modelCanon(stored), known) {
			r.fatalf("client %d: FETCH %d UID %d FLAGS %v, folder has %v (announced %v)", c.id, seq, uid, stored, want, c.announced)
		}
	}
	c.flags[uid] = modelCanon(stored)
}

// apply gives the responses of an Updates to client c, checking each as
// the client receives it.
func (r *modelRun) apply(c *clientModel, rs []Response, allowExpunge bool) {
	r.t.Helper()
	for _, resp := range rs {
		switch resp.Kind {
		case MailboxFlags:
			for _, f := range c.announced {
				if !slices.Contains(resp.Flags, f) {
					r.fatalf("client %d: FLAGS %v drops %s", c.id, resp.Flags, f)
				}
			}
			c.announced = slices.Clone(resp.Flags)
		case Expunge:
			if !allowExpunge {
				r.fatalf("client %d: EXPUNGE during FETCH, STORE or SEARCH", c.id)
			}
			n := resp.Num
			if n == 0 || int(n) > len(c.list) {
				r.fatalf("client %d: EXPUNGE %d with %d messages", c.id, n, len(c.list))
			}
			u := c.list[n-1]
			if !r.f.expunged[u] {
				r.fatalf("client %d: EXPUNGE %d removes UID %d, which the folder still has", c.id, n, u)
			}
			c.list = slices.Delete(c.list, int(n-1), int(n))
			delete(c.flags, u)
		case Exists:
			n := int(resp.Num)
			if n <= len(c.list) {
				r.fatalf("client %d: EXISTS %d with %d messages", c.id, n, len(c.list))
			}
			var last imap.UID
			if len(c.list) > 0 {
				last = c.list[len(c.list)-1]
			}
			i, _ := slices.BinarySearch(r.f.live, last+1)
			add := r.f.live[i:]
			if len(add) != n-len(c.list) {
				r.fatalf("client %d: EXISTS %d after %d, folder has %d newer messages", c.id, n, len(c.list), len(add))
			}
			for _, u := range add {
				r.tellNew(c, u)
			}
			c.list = append(c.list, add...)
		case Recent:
			if c.rev2 {
				r.fatalf("client %d: RECENT under IMAP4rev2", c.id)
			}
			want := 0
			for _, u := range c.list {
				if c.expRecent[u] {
					want++
				}
			}
			if int(resp.Num) != want {
				r.fatalf("client %d: RECENT %d, want %d", c.id, resp.Num, want)
			}
		case Fetch:
			r.fetched(c, resp.Num, resp.UID, resp.Flags, true)
		default:
			r.fatalf("unknown response %v", resp)
		}
	}
}

// updates runs Updates for client c and applies them; then the client,
// having seen new messages, fetches their flags, as clients do.
func (r *modelRun) updates(c *clientModel, allowExpunge bool) {
	r.t.Helper()
	var last imap.UID
	if len(c.list) > 0 {
		last = c.list[len(c.list)-1]
	}
	rs, err := c.v.Updates(allowExpunge)
	if err != nil {
		r.fatalf("client %d: Updates: %v", c.id, err)
	}
	r.apply(c, rs, allowExpunge)
	i, _ := slices.BinarySearch(c.list, last+1)
	if i < len(c.list) {
		r.fetchFlags(c, c.list[i:])
	}
	r.checkList(c, allowExpunge)
}

// fetchFlags is a FETCH (FLAGS) of messages the client names.
func (r *modelRun) fetchFlags(c *clientModel, uids []imap.UID) {
	r.t.Helper()
	got := c.v.FetchFlags(uids...)
	for i, u := range uids {
		seq := uint32(slices.Index(c.list, u) + 1)
		if got[i] == nil {
			r.fatalf("client %d: no flags for UID %d", c.id, u)
		}
		r.fetched(c, seq, u, got[i], false)
	}
}

// checkList compares the client's messages with the folder. After an
// Updates that may expunge, they are equal, and so are the flags; before,
// the client may still hold expunged messages, in order.
func (r *modelRun) checkList(c *clientModel, full bool) {
	r.t.Helper()
	if full {
		if !slices.Equal(c.list, r.f.live) {
			r.fatalf("client %d has %v, folder %v", c.id, c.list, r.f.live)
		}
		for _, u := range c.list {
			if !slices.Equal(c.flags[u], r.f.flags[u]) {
				r.fatalf("client %d: UID %d flags %v, folder %v", c.id, u, c.flags[u], r.f.flags[u])
			}
		}
	}
	live := r.consistent(c)
	if !slices.Equal(live, r.f.live) {
		r.fatalf("client %d has %v, folder %v (after an Updates every live message is known)", c.id, c.list, r.f.live)
	}
}

// consistent checks what holds at any time: the client's messages are in
// UID order, each is in the folder or expunged from it, every message of
// the folder up to the client's last is among them, and the view counts as
// many. It returns the client's messages still in the folder.
func (r *modelRun) consistent(c *clientModel) []imap.UID {
	r.t.Helper()
	var kept []imap.UID
	for _, u := range c.list {
		if !r.f.expunged[u] {
			kept = append(kept, u)
		} else if _, ok := r.f.flags[u]; !ok {
			r.fatalf("client %d holds unknown UID %d", c.id, u)
		}
	}
	var last imap.UID
	if len(c.list) > 0 {
		last = c.list[len(c.list)-1]
	}
	i, _ := slices.BinarySearch(r.f.live, last+1)
	if !slices.IsSorted(c.list) || !slices.Equal(kept, r.f.live[:i]) {
		r.fatalf("client %d has %v, folder %v", c.id, c.list, r.f.live)
	}
	if int(c.v.NumMessages()) != len(c.list) {
		r.fatalf("client %d: view has %d messages, client %d", c.id, c.v.NumMessages(), len(c.list))
	}
	return kept
}

// open selects (or examines) the folder for client c.
func (r *modelRun) open(c *clientModel, readOnly bool) {
	r.t.Helper()
	if c.selected {
		c.v.Close()
	}
	v, data, err := r.mb.Open(ViewOptions{ReadOnly: readOnly, Rev2: c.rev2})
	if err != nil {
		r.fatalf("open: %v", err)
	}
	r.f.sessions++
	*c = clientModel{id: c.id, sess: r.f.sessions, rev2: c.rev2, v: v, readOnly: readOnly, selected: true, flags: map[imap.UID][]imap.Flag{},
		recentIn: map[imap.UID]bool{}, expRecent: map[imap.UID]bool{}, announced: data.Flags}
	if int(data.NumMessages) != len(r.f.live) {
		r.fatalf("SELECT EXISTS %d, folder has %d", data.NumMessages, len(r.f.live))
	}
	c.list = slices.Clone(r.f.live)
	for _, u := range c.list {
		r.tellNew(c, u)
	}
	want := 0
	for _, u := range c.list {
		if c.expRecent[u] {
			want++
		}
	}
	if int(data.NumRecent) != want {
		r.fatalf("SELECT RECENT %d, want %d", data.NumRecent, want)
	}
	if readOnly != (data.PermanentFlags == nil) {
		r.fatalf("PERMANENTFLAGS %v read-only %v", data.PermanentFlags, readOnly)
	}
	var fu uint32
	for i, u := range c.list {
		if !slices.Contains(r.f.flags[u], imap.FlagSeen) {
			fu = uint32(i) + 1
			break
		}
	}
	if data.FirstUnseenSeqNum != fu {
		r.fatalf("SELECT UNSEEN %d, want %d", data.FirstUnseenSeqNum, fu)
	}
	r.fetchFlags(c, c.list)
	r.checkList(c, true)
}

// randSeqSet picks a sequence set around the client's messages; valid
// reports whether every number is one the client was told of.
func (r *modelRun) randSeqSet(c *clientModel) (set imap.SeqSet, valid bool) {
	n := uint32(len(c.list))
	valid = n > 0
	for range 1 + r.rng.IntN(2) {
		a, b := 1+r.rng.Uint32N(n+2), 1+r.rng.Uint32N(n+2)
		switch r.rng.IntN(5) {
		case 0:
			b = 0 // "*"
		case 1:
			a, b = 0, 0
		}
		set = append(set, imap.SeqRange{Start: a, Stop: b})
		if a > n || b > n {
			valid = false
		}
	}
	return set, valid
}

// resolveSeq resolves a random sequence set and checks the answer.
func (r *modelRun) resolveSeq(c *clientModel) []Target {
	r.t.Helper()
	set, valid := r.randSeqSet(c)
	ts, err := c.v.Resolve(set)
	if valid != (err == nil) {
		r.fatalf("client %d with %d messages: Resolve(%v) = %v, valid %v", c.id, len(c.list), set, err, valid)
	}
	want := map[uint32]bool{}
	if valid {
		n := uint32(len(c.list))
		for _, rg := range set {
			lo, hi := static(rg.Start, rg.Stop, n)
			for i := lo; i <= hi; i++ {
				want[i] = true
			}
		}
	}
	if len(ts) != len(want) {
		r.fatalf("client %d: Resolve(%v) gave %d messages, want %d", c.id, set, len(ts), len(want))
	}
	for _, tg := range ts {
		if !slices.Equal(tg.Flags, r.f.flags[tg.UID]) || tg.Recent != (c.expRecent[tg.UID] && !c.rev2) {
			r.fatalf("client %d: Resolve gave %+v; folder has flags %v, recent %v", c.id, tg, r.f.flags[tg.UID], c.expRecent[tg.UID])
		}
		if !want[tg.Seq] || c.list[tg.Seq-1] != tg.UID || tg.Live == r.f.expunged[tg.UID] {
			r.fatalf("client %d: Resolve(%v) gave %+v; client has UID %d there", c.id, set, tg, c.list[tg.Seq-1])
		}
	}
	return ts
}

func (r *modelRun) do() {
	f := r.f
	c := r.clients[r.rng.IntN(len(r.clients))]
	if !c.selected {
		r.op = fmt.Sprintf("client %d opens", c.id)
		r.open(c, c.id == 2 || r.rng.IntN(4) == 0)
		return
	}
	switch k := r.rng.IntN(20); {
	case k < 3: // provider: new mail
		r.op = "provider adds"
		var add []NewMessage
		for range 1 + r.rng.IntN(3) {
			f.next += imap.UID(1 + r.rng.IntN(3))
			fl := r.randFlags()
			add = append(add, NewMessage{UID: f.next, Flags: fl})
			f.live = append(f.live, f.next)
			f.flags[f.next] = modelCanon(fl)
		}
		if err := r.mb.Add(add...); err != nil {
			r.fatalf("Add: %v", err)
		}
	case k < 5: // provider or another client: expunge
		r.op = "provider expunges"
		if len(f.live) == 0 {
			return
		}
		var uids []imap.UID
		for range 1 + r.rng.IntN(2) {
			u := f.live[r.rng.IntN(len(f.live))]
			if !slices.Contains(uids, u) {
				uids = append(uids, u)
			}
		}
		for _, u := range uids {
			f.live = slices.DeleteFunc(f.live, func(x imap.UID) bool { return x == u })
			f.expunged[u] = true
		}
		if n := r.mb.Expunge(uids...); n != len(uids) {
			r.fatalf("Expunge(%v) = %d", uids, n)
		}
	case k < 7: // provider: flags
		r.op = "provider sets flags"
		if len(f.live) == 0 {
			return
		}
		u := f.live[r.rng.IntN(len(f.live))]
		fl := r.randFlags()
		op := imap.StoreFlagsOp(r.rng.IntN(3))
		f.flags[u] = modelOp(f.flags[u], op, fl)
		r.mb.SetFlags(nil, FlagChange{UID: u, Op: op, Flags: fl})
	case k < 10: // STORE
		r.op = fmt.Sprintf("client %d stores", c.id)
		if c.readOnly || len(c.list) == 0 {
			r.updates(c, true)
			return
		}
		set, _ := r.randSeqSet(c)
		for i := range set {
			set[i].Start, set[i].Stop = min(set[i].Start, uint32(len(c.list))), min(set[i].Stop, uint32(len(c.list)))
		}
		ts, err := c.v.Resolve(set)
		if err != nil {
			r.fatalf("Resolve(%v): %v", set, err)
		}
		fl := r.randFlags()
		op := imap.StoreFlagsOp(r.rng.IntN(3))
		silent := r.rng.IntN(3) == 0
		var changes []FlagChange
		var uids []imap.UID
		for _, tg := range ts {
			if tg.Live {
				changes = append(changes, FlagChange{UID: tg.UID, Op: op, Flags: fl})
				uids = append(uids, tg.UID)
				f.flags[tg.UID] = modelOp(f.flags[tg.UID], op, fl)
			}
			if silent {
				// The client assumes its STORE did what it asked.
				c.flags[tg.UID] = modelOp(c.flags[tg.UID], op, fl)
			}
		}
		r.mb.SetFlags(c.v, changes...)
		if !silent {
			c.v.QueueFetch(uids...)
		}
		r.updates(c, false)
	case k < 13: // FETCH by sequence number
		r.op = fmt.Sprintf("client %d fetches", c.id)
		ts := r.resolveSeq(c)
		var uids []imap.UID
		for _, tg := range ts {
			uids = append(uids, tg.UID)
		}
		r.fetchFlags(c, uids)
		r.updates(c, false)
	case k < 14: // UID FETCH, which may name messages not told yet
		r.op = fmt.Sprintf("client %d UID fetches", c.id)
		a, b := imap.UID(1+r.rng.Uint32N(uint32(f.next)+2)), imap.UID(r.rng.Uint32N(uint32(f.next)+2))
		ts, err := c.v.Resolve(imap.UIDSet{{Start: a, Stop: b}})
		if err != nil {
			r.fatalf("UID Resolve: %v", err)
		}
		// "*" is the largest UID in use: of the folder, or of the
		// messages the client still holds (RFC 9051 §9, seq-number).
		var top imap.UID
		if len(f.live) > 0 {
			top = f.live[len(f.live)-1]
		}
		if len(c.list) > 0 {
			top = max(top, c.list[len(c.list)-1])
		}
		lo, hi := static(uint32(a), uint32(b), uint32(top))
		var want []imap.UID
		for _, u := range c.list {
			if uint32(u) >= lo && uint32(u) <= hi {
				want = append(want, u)
			}
		}
		var last imap.UID
		if len(c.list) > 0 {
			last = c.list[len(c.list)-1]
		}
		for _, u := range f.live {
			if u > last && uint32(u) >= lo && uint32(u) <= hi {
				want = append(want, u)
			}
		}
		var got []imap.UID
		for _, tg := range ts {
			got = append(got, tg.UID)
			if tg.Seq != 0 && c.list[tg.Seq-1] != tg.UID || tg.Seq == 0 && (tg.UID <= last || !tg.Live) {
				r.fatalf("UID Resolve gave %+v", tg)
			}
		}
		if !slices.Equal(got, want) {
			r.fatalf("UID Resolve %d:%d (* = largest, the folder's newest is %d) gave %v, want %v", a, b, f.next, got, want)
		}
		r.updates(c, false)
	case k < 17: // NOOP, IDLE
		r.op = fmt.Sprintf("client %d NOOP", c.id)
		r.updates(c, true)
	case k < 18: // SEARCH, which must not expunge
		r.op = fmt.Sprintf("client %d SEARCH", c.id)
		r.updates(c, false)
	case k < 19: // EXPUNGE of the \Deleted messages
		r.op = fmt.Sprintf("client %d EXPUNGE", c.id)
		if c.readOnly {
			r.updates(c, true)
			return
		}
		var uids []imap.UID
		for _, u := range f.live {
			if slices.Contains(f.flags[u], imap.FlagDeleted) {
				uids = append(uids, u)
			}
		}
		for _, u := range uids {
			f.live = slices.DeleteFunc(f.live, func(x imap.UID) bool { return x == u })
			f.expunged[u] = true
		}
		r.mb.Expunge(uids...)
		r.updates(c, true)
	default: // UNSELECT or reselect
		r.op = fmt.Sprintf("client %d unselects", c.id)
		c.v.Close()
		c.selected = false
		if r.rng.IntN(2) == 0 {
			r.op = fmt.Sprintf("client %d reselects", c.id)
			r.open(c, c.id == 2 || r.rng.IntN(4) == 0)
		}
	}
	// Every client's view must stay consistent with what it was told.
	for _, o := range r.clients {
		if o.selected {
			r.consistent(o)
		}
	}
}

func runModel(t *testing.T, seed uint64, steps int) {
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	logSize := []int{1, 3, 0}[rng.IntN(3)]
	start := imap.UID(1 + rng.IntN(5))
	f := &folderModel{flags: map[imap.UID][]imap.Flag{}, expunged: map[imap.UID]bool{}, takenBy: map[imap.UID]int{}}
	r := &modelRun{t: t, rng: rng, f: f}
	n := rng.IntN(8)
	var init []NewMessage
	for i := range n {
		u := imap.UID(i + 1)
		fl := r.randFlags()
		init = append(init, NewMessage{UID: u, Flags: fl})
		f.live = append(f.live, u)
		f.flags[u] = modelCanon(fl)
		f.next = u
	}
	f.recentFrom = start
	r.mb = NewMailbox(Config{UIDValidity: 1, UIDNext: f.next + 1, RecentFrom: start, LogSize: logSize})
	if err := r.mb.Add(init...); err != nil {
		t.Fatal(err)
	}
	// Clients 0 and 1 read-write (1 sometimes read-only), 2 read-only,
	// 3 an IMAP4rev2 client.
	for i := range 4 {
		r.clients = append(r.clients, &clientModel{id: i, rev2: i == 3})
	}
	for r.step = 0; r.step < steps; r.step++ {
		r.do()
	}
	// Finally every client catches up completely.
	for _, c := range r.clients {
		if c.selected {
			r.op = fmt.Sprintf("client %d final NOOP", c.id)
			r.updates(c, true)
		}
	}
	// Exactly one read-write session got \Recent for every message a
	// read-write session was told of (each FETCH checked that it was the
	// first one told); the sessions still open saw it.
	for u, sess := range f.takenBy {
		for _, c := range r.clients {
			if c.selected && c.sess == sess && slices.Contains(c.list, u) && !c.rev2 && !c.recentIn[u] {
				t.Fatalf("UID %d: client %d took \\Recent but did not see it", u, c.id)
			}
		}
	}
}

// modelSeeds sets how many seeds TestModelRandom runs; a deeper run:
// go test ./seqview -run TestModelRandom -args -seeds=20000
var modelSeeds = flag.Int("seeds", 300, "seeds of TestModelRandom")

func TestModelRandom(t *testing.T) {
	seeds, steps := *modelSeeds, 300
	if testing.Short() {
		seeds = min(seeds, 50)
	}
	for seed := range uint64(seeds) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) { runModel(t, seed, steps) })
	}
}
