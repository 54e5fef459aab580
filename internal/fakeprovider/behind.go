package fakeprovider

import (
	"slices"
	"sort"
	"time"
)

// The methods of this file act on a mailbox behind the bridge's back, as
// mail arriving or another client of the same mailbox would, and let a
// test look at what the provider holds. They take no latency and no
// faults, need no password, and are journaled with Behind set.

// Deliver files raw in folder, unread, as mail arriving from elsewhere,
// and returns its UID.
func (p *Provider) Deliver(user, folder string, raw []byte) (int64, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	a, err := p.account(user)
	if err != nil {
		return 0, err
	}
	f, err := a.folder(folder)
	if err != nil {
		return 0, err
	}
	m := f.insert(slices.Clone(raw), true, receivedNow(p.now), "")
	p.record(Event{Op: "Deliver", User: a.address, Folder: folder, New: []int64{m.uid}, Raws: [][]byte{m.raw}, Behind: true})
	return m.uid, nil
}

// Remove deletes a message for good, as another client expunging it.
func (p *Provider) Remove(user, folder string, uid int64) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	a, err := p.account(user)
	if err != nil {
		return err
	}
	f, err := a.folder(folder)
	if err != nil {
		return err
	}
	ms, err := f.require([]int64{uid})
	if err != nil {
		return err
	}
	f.remove(ms)
	p.record(Event{Op: "Remove", User: a.address, Folder: folder, UIDs: []int64{uid}, Forever: true, Behind: true})
	return nil
}

// SetReadBehind marks a message read or unread, as another client
// reading it.
func (p *Provider) SetReadBehind(user, folder string, uid int64, read bool) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	a, err := p.account(user)
	if err != nil {
		return err
	}
	f, err := a.folder(folder)
	if err != nil {
		return err
	}
	ms, err := f.require([]int64{uid})
	if err != nil {
		return err
	}
	ms[0].unread = !read
	p.record(Event{Op: "SetReadBehind", User: a.address, Folder: folder, UIDs: []int64{uid}, Read: read, Behind: true})
	return nil
}

// Snapshot is what a folder holds at one moment.
type Snapshot struct {
	Folder   string
	NextUID  int64     // the UID the next message will get
	Messages []Stored  // ascending UID
	Clock    int64     // the journal's clock when it was taken
	Taken    time.Time // when it was taken
}

// Stored is one message of a Snapshot. Raw must not be changed.
type Stored struct {
	UID      int64
	Raw      []byte
	Read     bool
	Received time.Time
}

// UIDs lists the snapshot's UIDs.
func (s Snapshot) UIDs() []int64 {
	out := make([]int64, len(s.Messages))
	for i, m := range s.Messages {
		out[i] = m.UID
	}
	return out
}

// Snapshot returns the content of a folder.
func (p *Provider) Snapshot(user, folder string) (Snapshot, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	a, err := p.account(user)
	if err != nil {
		return Snapshot{}, err
	}
	f, err := a.folder(folder)
	if err != nil {
		return Snapshot{}, err
	}
	s := Snapshot{Folder: folder, NextUID: f.nextUID, Clock: p.clock, Taken: time.Now()}
	for _, m := range f.msgs {
		s.Messages = append(s.Messages, Stored{UID: m.uid, Raw: m.raw, Read: !m.unread, Received: m.received})
	}
	return s, nil
}

// FolderNames lists every folder of a mailbox, INBOX included, sorted.
func (p *Provider) FolderNames(user string) ([]string, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	a, err := p.account(user)
	if err != nil {
		return nil, err
	}
	var out []string
	for n := range a.folders {
		out = append(out, n)
	}
	sort.Strings(out)
	return out, nil
}
