package fakeprovider

import "slices"

// Event is one change the provider made, in the order made. A test reads
// the journal to learn what the bridge asked of the provider and when:
// Seq is a clock that advances with every change only, so Clock() read
// before and after a command brackets the changes made during it.
type Event struct {
	Seq int64
	// Op is the upstream.Provider method ("Save", "Copy", "Move",
	// "Delete", "SetRead", "Send", "Forward", the folder operations), or
	// for the changes a test made behind the bridge's back "Deliver",
	// "Remove", "SetReadBehind".
	Op     string
	User   string // lower-case address
	Folder string
	// Dest is the destination folder of Copy and Move, INBOX.Trash for a
	// Delete to the trash, the new name of RenameFolder.
	Dest string
	// UIDs are the messages acted on (sorted, without duplicates); New
	// the UIDs given to the messages made in Dest (or in Folder for
	// Save and Deliver), in the same order as UIDs, or as Raws.
	UIDs []int64
	New  []int64
	// Raws are the bytes of the messages made by Save, Deliver, Send and
	// Forward (not copied: they must not be changed).
	Raws [][]byte
	// Read is the state SetRead and SetReadBehind set, the subscription
	// SetSubscribed set.
	Read bool
	// Forever: a Delete that removed the messages for good.
	Forever bool
	// Behind: made by a test method, not through upstream.Provider.
	Behind bool
	// Lost: carried out, but its answer was lost by an injected fault.
	Lost bool
}

// record appends an event. Called with p.mu.
func (p *Provider) record(e Event) {
	p.clock++
	e.Seq = p.clock
	e.Lost = p.losing
	p.journal = append(p.journal, e)
}

// Journal returns every change made so far, oldest first.
func (p *Provider) Journal() []Event {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.journal)
}

// Clock returns the Seq of the last change made (0 before any).
func (p *Provider) Clock() int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.clock
}
