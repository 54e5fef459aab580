package mailstore

import (
	"context"
	"errors"
	"slices"
	"sync"
	"time"

	"github.com/emersion/go-imap/v2"

	"github.com/directbridge/directbridge/internal/seqview"
	"github.com/directbridge/directbridge/upstream"
	"github.com/directbridge/directbridge/upstream/directapi"
)

// Folder is the mirror of one provider folder of one user: the bridge's view of one provider folder of one user, shared by
// every connection that selects it: the UIDs, the read state, the flags the
// bridge keeps, message metadata loaded when first needed, and the views
// of the connections that have it selected (package seqview). One poller per
// mirror refreshes it while any connection watches it, so a hundred idle
// connections on one folder cost one poll per interval.
//
// Concurrency: mu guards every field below it, and is never held across a
// provider call or a state-store call, so no command on the folder waits
// for another's round trip. Refreshes are versioned instead of locked out:
// every change a command applies to the mirror raises version, and a
// refresh whose provider answers were read before such a change does not
// undo it (its read state is not applied; UIDs removed meanwhile stay
// removed, see removed). One refresh runs at a time; callers that want one
// share it (see refresh).
type Folder struct {
	store *Store
	user  string // lower-case Direct address
	name  string // provider folder name, also the IMAP name

	// flagMu orders the kept-flag writes of commands with their showing
	// (ApplyFlags); it is held across a state-store call, never across
	// a provider call, and never while taking anything but mu.
	flagMu sync.Mutex
	// kw groups the kept-flag writes of STOREs (keptwrites.go); its
	// leader takes flagMu.
	kw keptWrites
	// seenMu orders the \Seen changes of the folder at the provider with
	// their showing: held across a SetRead and the show after it, by
	// commands and by the read marking of appended messages (inside a
	// refresh too). So it is never held while waiting for a refresh; and
	// its waiters give up with their context all the same (ctxMutex).
	seenMu ctxMutex

	mu       sync.Mutex
	auth     directapi.Authentication // latest credentials of a watcher: polling needs some
	validity uint32
	uidNext  imap.UID // one more than the largest UID ever seen
	// mb is what sessions see of the folder: the UIDs in order, every
	// message's flags (\Seen from the provider, the rest from the state
	// store), \Recent, and the views of the connections that have the
	// folder selected (package seqview). Set by the first load.
	mb *seqview.Mailbox
	// byUID holds the handle (metadata) of every message of mb, and of
	// messages expunged lately, which a session not told yet may still
	// fetch (ghosts, oldest first, bounded by maxGhosts).
	byUID    map[imap.UID]*Message
	ghosts   []imap.UID
	loaded   bool
	syncedAt time.Time // when the last refresh finished
	// version counts the changes commands applied to the mirror (flags,
	// removals); a refresh compares it before and after its round trips.
	version uint64
	// removed holds UIDs this bridge removed (EXPUNGE, MOVE) at the
	// version of the removal, until a refresh that started later shows
	// the provider no longer lists them: an earlier refresh's answer must
	// not bring them back, nor take them for a renumbering.
	removed map[imap.UID]uint64
	// added holds UIDs this bridge put into the mirror itself (copies,
	// arrivals.go; arrivals placed without a listing, discover.go) at the
	// version it did, until a refresh that started
	// later lists them: an earlier refresh's answer lacks them but must
	// not take them for expunged.
	added map[imap.UID]uint64
	// readUnsure counts the read markings (SetRead) that failed: the
	// provider may have carried them out in part or whole, so the read
	// state the mirror shows may be wrong in a way the unread count does
	// not tell (one message read and another unread keep it). Until a
	// refresh that began after the last of them applied the provider's
	// list of unread messages (readSure), refreshes ask for that list.
	readUnsure, readSure uint64
	// readExact is when a refresh last took the mirror's read state whole
	// from the provider's list of unread messages; zero once anything may
	// have made the two differ since (readInferredLocked): messages shown
	// with a read state inferred (copies, arrivals, a refresh's newcomers
	// counted unread, another replica's message), a read marking that
	// failed. Only while it is set does a STORE that names \Seen take the
	// mirror's word (flags.go, readStateFresh); exactTried is when one
	// last asked for the list to set it.
	readExact, exactTried time.Time
	// wantList makes the next refresh read the list of unread messages
	// (readStateFresh asked for it), as readUnsure does, without taking
	// the read state for wrong meanwhile.
	wantList bool
	// carried are the kept flags COPY or MOVE wrote for copies the mirror
	// did not show yet (changes.go), at the version they were written: a
	// load or refresh that read the state store before the write lists
	// the copies with no flags, so the one that adds them shows these;
	// one that started after the write read them itself and drops them.
	carried map[imap.UID]carriedFlags
	// removing are the UIDs a DeleteMessagesByUIDs under way removes,
	// which other EXPUNGEs wait for rather than race (removals.go).
	removing map[imap.UID]*removal
	// flight is the refresh under way, if any; lastStart is when the
	// last successful one started.
	flight    *refreshFlight
	lastStart time.Time
	lastLight time.Time // when the last light refresh (Discover) started
	lastPeek  time.Time // when the last peek that found nothing new, or showed what it found, started (peek.go)
	// lastListed is when the last light refresh that listed the folder
	// started (one that placed arrivals from their metadata alone,
	// discover.go, did not list it).
	lastListed time.Time
	// listedAt is when the last successful refresh of this mirror that
	// listed the folder (GetUIDs), light or full, started (discover.go).
	listedAt time.Time
	// heldSince is when refreshes began holding back new UIDs for a
	// transfer under way into the folder (holdBackLocked); zero when the
	// last refresh held back none.
	heldSince time.Time
	// metaAt is when metadata was last listed for the folder (whole or
	// by received date): messages that arrived since are found with
	// SearchMessagesMetadataByReceivedDate from it on (meta.go).
	metaAt   time.Time
	metaFrom imap.UID // UIDNEXT when metaAt was taken: older messages were listed
	// pending are messages saved by APPEND whose UIDs the next refresh
	// finds (arrivals.go); settle is the refresh timer after the last.
	pending  []*arrival
	inflight []*arrival         // saves asked for and not answered yet
	savedAt  map[imap.UID]saved // arrivals placed, until their handles exist
	// unclaimed are UIDs that came in while arrivals were pending and
	// were not paired with one (a save answered after the refresh that
	// listed its message had started), with when they were first seen:
	// later refreshes may still pair them, until arrivalTTL.
	unclaimed map[imap.UID]time.Time
	// unmarked are appended messages shown \Seen whose SetRead waits for
	// the settle timer or the next full refresh (arrivals.go).
	unmarked      []imap.UID
	unmarkedAuth  upstream.Auth // the credentials they were appended with
	unmarkedSince time.Time     // when the first of them was placed
	settle        *time.Timer
	refs          int
	evict         *time.Timer // pending forget after the last release
	dropped       bool        // forgotten by the store; Acquire takes a new one
	stopPoll      chan struct{}
	gone          error // set when the folder vanished or its UIDs were renumbered
}

// refreshFlight is one refresh under way, which other callers can wait for.
type refreshFlight struct {
	light   bool // UIDs only (discover)
	started time.Time
	done    chan struct{}
	err     error
}

// message is the handle of one message of a mirror: what the bridge
// knows of it beyond its flags (which mb keeps). Its fields are guarded by
// the mirror's mu.
type Message struct {
	UID      imap.UID
	meta     *directapi.MessageDetail // metadata, nil until loaded
	expunged bool                     // gone from the folder; a ghost
	saved    time.Time                // when this bridge saved it (APPEND), else zero
	// received is the INTERNALDATE another replica showed for the
	// message before this one loaded its metadata (peers.go), else zero.
	received time.Time
}

// maxGhosts bounds the handles of expunged messages kept for sessions
// that have not been told yet: past it, the oldest lose their metadata
// (such a session then gets NO [EXPUNGEISSUED] for what it asks of them).
const maxGhosts = 4096

// forgetLocked turns the handles of expunged messages into ghosts.
// Called with m.mu held.
func (m *Folder) forgetLocked(uids []imap.UID) {
	m.dropUnmarkedLocked(uids)
	for _, u := range uids {
		if msg := m.byUID[u]; msg != nil && !msg.expunged {
			msg.expunged = true
			m.ghosts = append(m.ghosts, u)
		}
	}
	if over := len(m.ghosts) - maxGhosts; over > 0 {
		for _, u := range m.ghosts[:over] {
			if msg := m.byUID[u]; msg != nil && msg.expunged {
				delete(m.byUID, u)
			}
		}
		m.ghosts = slices.Delete(m.ghosts, 0, over)
	}
}

// live tells whether uid is a message of the folder (not expunged).
// Called with m.mu held.
func (m *Folder) live(uid imap.UID) bool {
	msg := m.byUID[uid]
	return msg != nil && !msg.expunged
}

// ErrFolderGone tells sessions that their selected folder no longer exists
// as they knew it.
var ErrFolderGone = errors.New("imapbackend: folder deleted or renumbered")

// MaxUID is the largest UID IMAP can carry (RFC 9051 §2.3.1.1: 32 bits).
const MaxUID = 0xFFFFFFFF

// ErrUIDTooLarge is a provider UID beyond 32 bits. It is refused
// explicitly rather than truncated into some other message's UID.
var ErrUIDTooLarge = errors.New("imapbackend: provider UID beyond 32 bits")

// markGoneLocked records that the folder was deleted or renumbered; the
// views learn it at once (an idling connection wakes, and the session
// says BYE). Called with m.mu held.
func (m *Folder) markGoneLocked() {
	m.gone = ErrFolderGone
	// Its UIDs name nothing any more (a renumbered folder's may name
	// other messages): no read marking waits for them.
	m.unmarked, m.unmarkedAuth = nil, upstream.Auth{}
	if m.mb != nil {
		m.mb.Gone()
	}
}

// ctxMutex is a mutex whose Lock gives up when the caller's context ends
// (internal/mailstore/doc.go: every wait for another goroutine has a deadline).
// Its zero value is unlocked.
type ctxMutex struct {
	once sync.Once
	ch   chan struct{}
}

// Lock takes the mutex, or returns ctx's error when ctx ends first.
func (l *ctxMutex) Lock(ctx context.Context) error {
	l.once.Do(func() { l.ch = make(chan struct{}, 1) })
	select {
	case l.ch <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Unlock lets the mutex go; it must be held.
func (l *ctxMutex) Unlock() { <-l.ch }

// awaitAll waits until every channel of done is closed, or returns ctx's
// error when ctx ends first (doc.go: every wait has a deadline).
func awaitAll(ctx context.Context, done []chan struct{}) error {
	for _, ch := range done {
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}
