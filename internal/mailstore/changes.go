package mailstore

import (
	"context"

	"github.com/emersion/go-imap/v2"

	"github.com/directbridge/directbridge/internal/seqview"
	"github.com/directbridge/directbridge/internal/state"
	"github.com/directbridge/directbridge/upstream/directapi"
)

// This file holds the changes commands make to a mirror themselves,
// without waiting for a refresh: copies that arrived, messages removed.

// copied is one message that went to another folder.
type copied struct {
	UID   imap.UID
	Flags []imap.Flag // kept flags (not \Seen)
	// Stored tells that Flags is the set the state store holds for the
	// copy (placeCopies), not only the source's.
	Stored bool
	Seen   bool // \Seen, which the provider's copy keeps
	Meta   *directapi.MessageDetail
}

// addCopies puts messages this bridge just copied or moved into the folder
// (newUIDs, ascending, paired with src) into the mirror, with the flags
// and metadata of their sources. A refresh that listed them first showed
// them without the flags the bridge keeps (the state store had none for
// them yet): they get those flags now, as FETCH FLAGS to every view. UIDs
// below UIDNEXT that the mirror does not hold are left alone (expunged
// meanwhile). A refresh whose answer was read before (and so lacks them)
// does not take them for expunged (see added and apply).
//
// New UIDs are added only when no unknown UID lies between the mirror's
// UIDNEXT and them (a message delivered at the same moment, below the
// copies): the mirror must not pass over a message it has not seen. Then
// it returns false, and the caller has the mirror refreshed; the copies'
// flags are carried (Folder.carried) for whichever refresh adds them, as
// that one may have read the state store before they were written. A
// mirror being loaded gets them the same way.
func (m *Folder) addCopies(ctx context.Context, newUIDs []imap.UID, src []copied) bool {
	m.mu.Lock()
	if m.dropped || m.gone != nil || len(newUIDs) == 0 {
		m.mu.Unlock()
		return true
	}
	m.version++
	m.readInferredLocked() // the copies show their sources' \Seen
	if !m.loaded {
		// Being loaded: the load may have read the flags before they
		// were written; it shows these when it ends.
		m.carryLocked(newUIDs, src)
		m.mu.Unlock()
		return true
	}
	ours := make(map[imap.UID]bool, len(newUIDs))
	for _, u := range newUIDs {
		ours[u] = true
	}
	gap := false
	for u := m.uidNext; u <= newUIDs[len(newUIDs)-1] && !gap; u++ {
		gap = !ours[u] && m.byUID[u] == nil
	}
	if m.added == nil {
		m.added = map[imap.UID]uint64{}
	}
	add := make([]seqview.NewMessage, 0, len(newUIDs))
	var changes []seqview.FlagChange
	for _, u := range newUIDs {
		// A copy, not an APPEND's message: no arrival may claim it
		// (arrivals.go, unclaimed).
		delete(m.unclaimed, u)
	}
	for i, u := range newUIDs {
		if msg := m.byUID[u]; msg != nil {
			fl, ok := m.mb.Flags(u)
			if !ok || msg.expunged {
				continue
			}
			if src[i].Stored {
				// Shown by a refresh already, perhaps without the
				// flags: the set the store made (\Seen is the
				// provider's).
				changes = append(changes, seqview.FlagChange{UID: u, Op: imap.StoreFlagsSet, Flags: withSeen(src[i].Flags, HasSeen(fl))})
			}
			if msg.meta == nil && src[i].Meta != nil {
				c := *src[i].Meta
				c.UID, c.Folder = int64(u), m.name
				msg.meta = &c
			}
			continue
		}
		if u < m.uidNext {
			continue
		}
		if gap {
			// The refresh that shows it may have read the state store
			// before the flags were written.
			m.carryLocked([]imap.UID{u}, src[i:i+1])
			continue
		}
		msg := &Message{UID: u}
		if d := src[i].Meta; d != nil {
			c := *d
			c.UID, c.Folder = int64(u), m.name
			msg.meta = &c
		}
		m.byUID[u] = msg
		m.added[u] = m.version
		add = append(add, seqview.NewMessage{UID: u, Flags: withSeen(src[i].Flags, src[i].Seen)})
	}
	m.showFlagsLocked(nil, changes)
	if err := m.showAddLocked(add); err != nil {
		m.mu.Unlock()
		m.store.cfg.Logger.Warn("imap copy: showing the copies failed", "user", m.user, "err", err)
		return false
	}
	if gap {
		m.mu.Unlock()
		return false
	}
	largest := m.raiseUIDNextLocked(newUIDs)
	m.mu.Unlock()
	if err := m.saveUIDNext(ctx, largest); err != nil {
		m.store.cfg.Logger.Warn("imap copy: state store", "err", err)
	}
	return true
}

// carriedFlags are kept flags a copy got before the mirror showed it.
type carriedFlags struct {
	flags   []imap.Flag
	version uint64
}

// carryLocked notes the kept flags of copies the mirror does not show
// yet (Folder.carried).
func (m *Folder) carryLocked(uids []imap.UID, src []copied) {
	if m.carried == nil {
		m.carried = map[imap.UID]carriedFlags{}
	}
	for i, u := range uids {
		if len(src[i].Flags) > 0 {
			m.carried[u] = carriedFlags{flags: src[i].Flags, version: m.version}
		}
	}
}

// takeCarriedLocked returns the kept flags to show for u, new to the
// mirror, listed by a refresh that started at version v0 with stored,
// the flags it read: a copy's carried flags added when they were written
// after the refresh began.
func (m *Folder) takeCarriedLocked(u imap.UID, v0 uint64, stored []imap.Flag) []imap.Flag {
	c, ok := m.carried[u]
	if !ok {
		return stored
	}
	delete(m.carried, u)
	if c.version <= v0 {
		return stored
	}
	return canonicalFlags(state.ApplyFlagChange(flagStrings(stored), state.FlagChange{Add: flagStrings(c.flags)}))
}

// dropCarriedLocked forgets carried flags a refresh that started at
// version v0 or a load read itself (written before it began).
func (m *Folder) dropCarriedLocked(v0 uint64) {
	for u, c := range m.carried {
		if c.version <= v0 {
			delete(m.carried, u)
		}
	}
}

// remove takes messages the provider no longer has in a folder
// out of its mirror, queueing one EXPUNGE per message for every view
// (which numbers each when it is sent, so that each number is right at
// that moment, RFC 9051 §7.5.1), and drops the flags the bridge kept for
// them, raising the mirror's version and noting the removals so that an
// older refresh's answer does not bring them back (mirror.apply).
func (m *Folder) remove(ctx context.Context, validity uint32, uids []imap.UID) {
	forget := map[uint32][]string{}
	m.mu.Lock()
	if m.loaded {
		m.version++
		if m.removed == nil {
			m.removed = map[imap.UID]uint64{}
		}
		for _, u := range uids {
			m.removed[u] = m.version
			if fl, ok := m.mb.Flags(u); ok && len(KeptOf(fl)) > 0 {
				forget[uint32(u)] = nil
			}
		}
		m.showExpungeLocked(uids)
		m.forgetLocked(uids)
	}
	m.mu.Unlock()
	if len(forget) > 0 {
		if err := m.store.cfg.State.SetFlags(ctx, m.user, m.name, validity, forget); err != nil {
			// Harmless: the provider never hands these UIDs out again.
			m.store.cfg.Logger.Warn("imap: dropping kept flags failed", "user", m.user, "err", err)
		}
	}
}
