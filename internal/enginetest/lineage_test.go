package enginetest

import (
	"fmt"
	"slices"
	"strings"

	"github.com/emersion/go-imap/v2"

	"github.com/directbridge/directbridge/internal/fakeprovider"
)

// The lineage is the provider's truth as the model reads it: every
// message that ever was, under its (user, folder, UID), with its model
// id, where it came from, when it came and went, and its read state over
// time. It is built from the fake provider's journal, whose clock the
// commands' records share (record.start, record.end).

// instKey names one message at the provider: UIDs are never reused, so
// the key names one message forever.
type instKey struct {
	user, folder string
	uid          imap.UID
}

func (k instKey) String() string { return fmt.Sprintf("%s %s UID %d", k.user, k.folder, k.uid) }

// instance is one message at the provider.
type instance struct {
	key     instKey
	modelID string
	raw     []byte
	// origin is the change that made it: Save, Deliver, Copy, Move, or
	// Delete (to the Trash); src the message it was made from.
	origin  *fakeprovider.Event
	src     *instance
	created int64 // clock of its making
	removed int64 // clock of its removal, 0 while it is there
	// reads are its read state over time: reads[i] is the state from
	// readAt[i] on. It starts unread, or as its source was.
	reads  []bool
	readAt []int64
	readBy []*fakeprovider.Event // the change that set reads[i]
	// behindRead: another client changed its read state (SetReadBehind).
	behindRead bool
}

// readBehind reports a read state changed behind the bridge's back on
// the message or on one it was copied from.
func (in *instance) readBehind() bool {
	for ; in != nil; in = in.src {
		if in.behindRead {
			return true
		}
	}
	return false
}

// changedBehindFrom reports whether the read state the message had at
// clock at was set behind the bridge's back (SetReadBehind), away from
// state was: what the bridge last saw of it, unless it missed more.
func (in *instance) changedBehindFrom(at int64, was bool) bool {
	i := 0
	for i+1 < len(in.readAt) && in.readAt[i+1] <= at {
		i++
	}
	return i > 0 && in.readBy[i].Behind && in.reads[i-1] == was
}

// readOver reports whether the message had read state want at some
// moment of [from, to] (clocks).
func (in *instance) readOver(from, to int64, want bool) bool {
	state, i := in.reads[0], 1
	for ; i < len(in.readAt) && in.readAt[i] <= from; i++ {
		state = in.reads[i]
	}
	if state == want {
		return true
	}
	for ; i < len(in.readAt) && in.readAt[i] <= to; i++ {
		if in.reads[i] == want {
			return true
		}
	}
	return false
}

// readHistory tells the message's read states over time, for failure
// messages: "unread at 3, read at 19, unread at 21".
func (in *instance) readHistory() string {
	var parts []string
	for i, r := range in.reads {
		state := "unread"
		if r {
			state = "read"
		}
		parts = append(parts, fmt.Sprintf("%s at clock %d (%s)", state, in.readAt[i], eventText(in.readBy[i])))
	}
	return strings.Join(parts, ", ")
}

// eventText names a provider change for failure messages: its
// operation, folders and UIDs.
func eventText(e *fakeprovider.Event) string {
	if e == nil {
		return "?"
	}
	s := e.Op + " " + e.Folder
	if e.Dest != "" {
		s += "->" + e.Dest
	}
	if len(e.UIDs) > 0 {
		s += fmt.Sprintf(" %v", e.UIDs)
	}
	if len(e.New) > 0 {
		s += fmt.Sprintf(" new %v", e.New)
	}
	return s
}

// ancestry tells where the message came from, each source with its
// origin and read history, for failure messages about read state (a copy
// starts as its source was).
func (in *instance) ancestry() string {
	var parts []string
	for ; in != nil; in = in.src {
		part := fmt.Sprintf("%s by %s at clock %d (%s)", in.key, in.origin.Op, in.created, in.readHistory())
		if in.behindRead {
			part += " read behind the bridge's back"
		}
		parts = append(parts, part)
	}
	return strings.Join(parts, " <- ")
}

// liveOver reports whether the message was there from before from until
// after to.
func (in *instance) liveOver(from, to int64) bool {
	return in.created <= from && (in.removed == 0 || in.removed > to)
}

// lineage is every message of the journal read so far.
type lineage struct {
	byKey   map[instKey]*instance
	byModel map[string][]*instance
	read    int // journal events applied
}

func newLineage() *lineage {
	return &lineage{byKey: map[instKey]*instance{}, byModel: map[string][]*instance{}}
}

// apply reads the journal's events not read yet.
func (l *lineage) apply(journal []fakeprovider.Event) {
	for ; l.read < len(journal); l.read++ {
		e := &journal[l.read]
		switch e.Op {
		case "Save", "Deliver", "Send", "Forward":
			for i, u := range e.New {
				raw := e.Raws[i]
				l.add(&instance{key: instKey{e.User, e.Folder, imap.UID(u)}, modelID: modelIDOf(raw), raw: raw,
					origin: e, created: e.Seq, reads: []bool{false}, readAt: []int64{e.Seq}, readBy: []*fakeprovider.Event{e}})
			}
		case "Copy", "Move", "Delete":
			for i, u := range e.UIDs {
				src := l.byKey[instKey{e.User, e.Folder, imap.UID(u)}]
				if e.Op != "Copy" {
					src.removed = e.Seq
				}
				if i < len(e.New) {
					l.add(&instance{key: instKey{e.User, e.Dest, imap.UID(e.New[i])}, modelID: src.modelID, raw: src.raw,
						origin: e, src: src, created: e.Seq, reads: []bool{src.reads[len(src.reads)-1]}, readAt: []int64{e.Seq}, readBy: []*fakeprovider.Event{e}})
				}
			}
		case "Remove":
			for _, u := range e.UIDs {
				l.byKey[instKey{e.User, e.Folder, imap.UID(u)}].removed = e.Seq
			}
		case "SetRead", "SetReadBehind":
			for _, u := range e.UIDs {
				in := l.byKey[instKey{e.User, e.Folder, imap.UID(u)}]
				in.reads, in.readAt, in.readBy = append(in.reads, e.Read), append(in.readAt, e.Seq), append(in.readBy, e)
				in.behindRead = in.behindRead || e.Behind
			}
		}
	}
}

func (l *lineage) add(in *instance) {
	l.byKey[in.key] = in
	l.byModel[in.modelID] = append(l.byModel[in.modelID], in)
}

// get returns the message under a key, or nil when there never was one.
func (l *lineage) get(user, folder string, uid imap.UID) *instance {
	return l.byKey[instKey{user, folder, uid}]
}

// copiesOf tells the messages the provider made from the one under
// key (copies, moves, deletes to the Trash), with the change and clock
// of each, for failure messages.
func (l *lineage) copiesOf(key instKey) string {
	var parts []string
	for _, in := range l.byKey {
		if in.src != nil && in.src.key == key {
			parts = append(parts, fmt.Sprintf("%s by %s at clock %d", in.key, eventText(in.origin), in.created))
		}
	}
	if len(parts) == 0 {
		return "none"
	}
	slices.Sort(parts)
	return strings.Join(parts, "; ")
}

// describe tells what the provider's message under a key is, for
// failure messages.
func (l *lineage) describe(user, folder string, uid imap.UID) string {
	in := l.get(user, folder, uid)
	if in == nil {
		return "no such message at the provider"
	}
	how := fmt.Sprintf("message %s, made by %s at clock %d", in.modelID, in.origin.Op, in.created)
	if in.src != nil {
		how += " from " + in.src.key.String()
	}
	return how
}
