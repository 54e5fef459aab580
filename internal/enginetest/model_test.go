package enginetest

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/emersion/go-imap/v2"
)

// The model is the history of the commands the sessions sent, each with
// what it was answered and when, on two clocks: the provider's journal
// clock (start, end), which brackets the provider changes made while it
// ran, and the test's own (t0, t1), which orders commands that change
// nothing at the provider (keywords live in the bridge's state store).
// The checks (checks_test.go, keywords_test.go, journal_test.go) read it
// beside the provider's lineage (lineage_test.go).

// record is one command and its answer.
type record struct {
	sess   int
	user   string
	cmd    string // "APPEND", "STORE", "FETCH", "COPY", "MOVE", "EXPUNGE", "UID EXPUNGE", "SELECT", "NOOP", "LOOK"
	folder string // the folder selected, or APPEND's
	dest   string // COPY and MOVE
	// uids are the UIDs named; nil names every message (EXPUNGE, LOOK).
	uids    []imap.UID
	storeOp imap.StoreFlagsOp
	flags   []imap.Flag // STORE's and APPEND's
	peek    bool        // FETCH BODY.PEEK[]
	modelID string      // APPEND

	start, end int64     // the provider's clock before the command was sent and after its answer
	t0, t1     time.Time // the test's; t1 is zero until the answer came
	faulted    bool      // a fault was injected while it ran
	err        error     // nil: OK

	appendUID imap.UID              // APPENDUID
	validity  uint32                // SELECT's, APPENDUID's or COPYUID's UIDVALIDITY
	copied    map[imap.UID]imap.UID // COPYUID: source UID to new UID
	// fetched holds a FETCH's answers (bodies) and a LOOK's (header
	// sections), with their flags, by UID.
	fetched map[imap.UID]fetchedMsg
}

// fetchedMsg is one FETCH response.
type fetchedMsg struct {
	seq   uint32
	flags []imap.Flag
	body  []byte
}

func (r *record) ok() bool { return r.err == nil }

// names reports whether the command named uid.
func (r *record) names(uid imap.UID) bool { return r.uids == nil || slices.Contains(r.uids, uid) }

// overlaps reports whether two commands were under way at some moment
// together; one not answered yet is under way still.
func (r *record) overlaps(o *record) bool {
	return (o.t1.IsZero() || r.t0.Before(o.t1)) && (r.t1.IsZero() || o.t0.Before(r.t1))
}

// stores reports a STORE of flag.
func (r *record) stores(flag imap.Flag) bool {
	return r.cmd == "STORE" && slices.Contains(r.flags, flag)
}

// noCode returns the response code of a NO answer, or "" for any other.
func (r *record) noCode() (imap.ResponseCode, bool) {
	var ie *imap.Error
	if errors.As(r.err, &ie) && ie.Type == imap.StatusResponseTypeNo {
		return ie.Code, true
	}
	return "", false
}

func (r *record) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "session %d (%s) in %s: ", r.sess, r.user, r.folder)
	switch r.cmd {
	case "APPEND":
		fmt.Fprintf(&b, "APPEND %s %v (%s)", r.folder, r.flags, r.modelID)
	case "STORE":
		op := map[imap.StoreFlagsOp]string{imap.StoreFlagsAdd: "+FLAGS", imap.StoreFlagsDel: "-FLAGS", imap.StoreFlagsSet: "FLAGS"}[r.storeOp]
		fmt.Fprintf(&b, "UID STORE %s %s %v", uidList(r.uids), op, r.flags)
	case "FETCH":
		item := "BODY[]"
		if r.peek {
			item = "BODY.PEEK[]"
		}
		fmt.Fprintf(&b, "UID FETCH %s (UID FLAGS %s)", uidList(r.uids), item)
	case "COPY", "MOVE":
		fmt.Fprintf(&b, "UID %s %s %s", r.cmd, uidList(r.uids), r.dest)
	case "UID EXPUNGE":
		fmt.Fprintf(&b, "UID EXPUNGE %s", uidList(r.uids))
	case "LOOK":
		b.WriteString("UID FETCH 1:* (UID FLAGS BODY.PEEK[HEADER.FIELDS (" + modelHeader + ")])")
	default:
		b.WriteString(r.cmd)
	}
	switch {
	case r.t1.IsZero():
		fmt.Fprintf(&b, " [clock %d.., sent at %s] -> no answer", r.start, r.t0.Format("15:04:05.000"))
	case r.err != nil:
		fmt.Fprintf(&b, " [clock %d..%d, %v] -> %v", r.start, r.end, r.t1.Sub(r.t0).Round(time.Microsecond), r.err)
	default:
		fmt.Fprintf(&b, " [clock %d..%d, %v] -> OK", r.start, r.end, r.t1.Sub(r.t0).Round(time.Microsecond))
		if r.appendUID != 0 {
			fmt.Fprintf(&b, " [APPENDUID %d %d]", r.validity, r.appendUID)
		}
		if len(r.copied) > 0 {
			fmt.Fprintf(&b, " [COPYUID %v]", r.copied)
		}
	}
	return b.String()
}

func uidList(uids []imap.UID) string {
	if uids == nil {
		return "1:*"
	}
	return imap.UIDSetNum(uids...).String()
}

// model is the history of every session's commands, in the order sent
// (each session's in its order), a command not answered yet included.
// What it holds never changes: a command's answer replaces its record
// with another, so that the checks of one session can read the records
// of the others without locks.
type model struct {
	mu      sync.Mutex
	records []*record
}

// begin notes a command about to be sent and returns its place.
func (m *model) begin(r *record) int {
	c := *r
	m.mu.Lock()
	defer m.mu.Unlock()
	m.records = append(m.records, &c)
	return len(m.records) - 1
}

// end notes the command at place i answered, as r now is.
func (m *model) end(i int, r *record) {
	c := *r
	m.mu.Lock()
	defer m.mu.Unlock()
	m.records[i] = &c
}

// all returns the records so far.
func (m *model) all() []*record {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.records)
}
