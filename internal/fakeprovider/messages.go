package fakeprovider

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/directbridge/directbridge/upstream"
	"github.com/directbridge/directbridge/upstream/directapi"
)

// message is one stored message. raw is never changed once stored, so
// copies and answers share it.
type message struct {
	uid      int64
	raw      []byte
	unread   bool
	received time.Time
	// trashedFrom is the folder a message deleted to INBOX.Trash came
	// from (what GetDeletedMessageCount counts).
	trashedFrom string
}

// insert files a message under the folder's next UID.
func (f *folder) insert(raw []byte, unread bool, received time.Time, trashedFrom string) *message {
	m := &message{uid: f.nextUID, raw: raw, unread: unread, received: received, trashedFrom: trashedFrom}
	f.nextUID++
	f.msgs = append(f.msgs, m)
	return m
}

// index returns the position of uid, or -1.
func (f *folder) index(uid int64) int {
	i := sort.Search(len(f.msgs), func(i int) bool { return f.msgs[i].uid >= uid })
	if i < len(f.msgs) && f.msgs[i].uid == uid {
		return i
	}
	return -1
}

// pick returns the messages with the given UIDs that exist, in UID order
// (missing ones left out, duplicates once).
func (f *folder) pick(uids []int64) []*message {
	var out []*message
	for _, u := range dedupe(uids) {
		if i := f.index(u); i >= 0 {
			out = append(out, f.msgs[i])
		}
	}
	return out
}

// require checks that every UID exists: the operations that change
// messages refuse the whole request otherwise (code 3), so nothing is
// half done. It returns the messages in UID order.
func (f *folder) require(uids []int64) ([]*message, error) {
	if len(uids) == 0 {
		return nil, errInvalid("uids missing")
	}
	want := dedupe(uids)
	ms := f.pick(want)
	if len(ms) == len(want) {
		return ms, nil
	}
	var missing []string
	for _, u := range want {
		if f.index(u) < 0 && len(missing) < 10 {
			missing = append(missing, fmt.Sprint(u))
		}
	}
	return nil, errInvalid("no message with uid %s in this folder", strings.Join(missing, ", "))
}

// remove takes messages out of the folder.
func (f *folder) remove(ms []*message) {
	gone := make(map[*message]bool, len(ms))
	for _, m := range ms {
		gone[m] = true
	}
	f.msgs = slices.DeleteFunc(f.msgs, func(m *message) bool { return gone[m] })
}

func uidsOf(ms []*message) []int64 {
	out := make([]int64, len(ms))
	for i, m := range ms {
		out[i] = m.uid
	}
	return out
}

func dedupe(uids []int64) []int64 {
	out := slices.Clone(uids)
	slices.Sort(out)
	return slices.Compact(out)
}

// UIDs lists a folder's UIDs in ascending order.
func (p *Provider) UIDs(ctx context.Context, auth upstream.Auth, name string) ([]int64, error) {
	var out []int64
	err := p.op(ctx, "UIDs", "GetUIDs", false, auth, func(a *account) error {
		f, err := a.folder(name)
		if err == nil {
			out = uidsOf(f.msgs)
		}
		return err
	})
	return out, err
}

// Count counts a folder's messages. The adapter's CheckCredentials is the
// same call on INBOX.
func (p *Provider) Count(ctx context.Context, auth upstream.Auth, name string) (int, error) {
	return p.count(ctx, "Count", "GetMessageCount", auth, name, false)
}

// UnreadCount counts a folder's unread messages.
func (p *Provider) UnreadCount(ctx context.Context, auth upstream.Auth, name string) (int, error) {
	return p.count(ctx, "UnreadCount", "GetUnreadMessageCount", auth, name, true)
}

func (p *Provider) count(ctx context.Context, method, restOp string, auth upstream.Auth, name string, unreadOnly bool) (int, error) {
	n := 0
	err := p.op(ctx, method, restOp, false, auth, func(a *account) error {
		f, err := a.lookup(name)
		if err != nil {
			return err
		}
		for _, m := range f.msgs {
			if !unreadOnly || m.unread {
				n++
			}
		}
		return nil
	})
	return n, err
}

// CheckCredentials authenticates with the cheapest read, GetMessageCount
// of INBOX, as the adapter does.
func (p *Provider) CheckCredentials(ctx context.Context, auth upstream.Auth) error {
	return p.op(ctx, "CheckCredentials", "GetMessageCount", false, auth, func(a *account) error {
		_, err := a.folder(Inbox)
		return err
	})
}

// listing answers the operations that return MessageDetails of the
// messages of a folder that keep passes, bodies included when full.
func (p *Provider) listing(ctx context.Context, method, restOp string, auth upstream.Auth, name string, full bool, keep func(*message) bool) ([]directapi.MessageDetail, error) {
	var out []directapi.MessageDetail
	err := p.op(ctx, method, restOp, false, auth, func(a *account) error {
		f, err := a.folder(name)
		if err != nil {
			return err
		}
		out = []directapi.MessageDetail{}
		for i, m := range f.msgs {
			if keep(m) {
				out = append(out, detail(name, i+1, m, full))
			}
		}
		return nil
	})
	return out, err
}

// Unread returns the unread messages of a folder, whole.
func (p *Provider) Unread(ctx context.Context, auth upstream.Auth, name string) ([]directapi.MessageDetail, error) {
	return p.listing(ctx, "Unread", "GetUnreadMessages", auth, name, true, func(m *message) bool { return m.unread })
}

// Metadata returns the metadata (no bodies) of every message of a folder.
func (p *Provider) Metadata(ctx context.Context, auth upstream.Auth, name string) ([]directapi.MessageDetail, error) {
	return p.listing(ctx, "Metadata", "GetMessageMetaData", auth, name, false, func(*message) bool { return true })
}

// MetadataReceived returns the metadata of the messages received in
// [begin, end], both ends included, at the millisecond the REST request
// carries.
func (p *Provider) MetadataReceived(ctx context.Context, auth upstream.Auth, name string, begin, end time.Time) ([]directapi.MessageDetail, error) {
	from, to := begin.UnixMilli(), end.UnixMilli()
	if to < from {
		return nil, p.op(ctx, "MetadataReceived", "SearchMessagesMetadataByReceivedDate", false, auth, func(*account) error {
			return errInvalid("endTime is before beginTime")
		})
	}
	return p.listing(ctx, "MetadataReceived", "SearchMessagesMetadataByReceivedDate", auth, name, false, func(m *message) bool {
		r := m.received.UnixMilli()
		return r >= from && r <= to
	})
}

// Messages returns whole messages by UID; missing UIDs are left out.
func (p *Provider) Messages(ctx context.Context, auth upstream.Auth, name string, uids []int64) ([]directapi.MessageDetail, error) {
	want := map[int64]bool{}
	for _, u := range uids {
		want[u] = true
	}
	if len(uids) == 0 {
		p.nothing("Messages")
		return nil, nil
	}
	return p.listing(ctx, "Messages", "GetMessagesByUIDs", auth, name, true, func(m *message) bool { return want[m.uid] })
}

// Raw returns the bytes of messages by UID; missing UIDs are left out.
func (p *Provider) Raw(ctx context.Context, auth upstream.Auth, name string, uids []int64) (map[int64][]byte, error) {
	out := map[int64][]byte{}
	if len(uids) == 0 {
		p.nothing("Raw")
		return out, nil
	}
	err := p.op(ctx, "Raw", "GetRawMessagesByUIDs", false, auth, func(a *account) error {
		f, err := a.folder(name)
		if err != nil {
			return err
		}
		for _, m := range f.pick(uids) {
			out[m.uid] = slices.Clone(m.raw)
		}
		return nil
	})
	return out, err
}

// Save files each raw message under a new UID, unread, received now, and
// answers without the UIDs. An empty message fails the whole request.
func (p *Provider) Save(ctx context.Context, auth upstream.Auth, name string, raws [][]byte) error {
	if len(raws) == 0 {
		p.nothing("Save")
		return nil
	}
	return p.op(ctx, "Save", "SaveRawMessages", true, auth, func(a *account) error {
		f, err := a.folder(name)
		if err != nil {
			return err
		}
		for i, raw := range raws {
			if len(raw) == 0 {
				return errInvalid("message %d: data is empty or not base64", i+1)
			}
		}
		now := receivedNow(p.now)
		e := Event{Op: "Save", User: a.address, Folder: name}
		for _, raw := range raws {
			m := f.insert(slices.Clone(raw), true, now, "")
			e.New, e.Raws = append(e.New, m.uid), append(e.Raws, m.raw)
		}
		p.record(e)
		return nil
	})
}

// SetRead marks messages read or unread; one missing UID refuses all.
func (p *Provider) SetRead(ctx context.Context, auth upstream.Auth, name string, uids []int64, read bool) error {
	restOp := "MarkMessagesAsUnreadByUIDs"
	if read {
		restOp = "MarkMessagesAsReadByUIDs"
	}
	if len(uids) == 0 {
		p.nothing("SetRead")
		return nil
	}
	return p.op(ctx, "SetRead", restOp, true, auth, func(a *account) error {
		f, err := a.folder(name)
		if err != nil {
			return err
		}
		ms, err := f.require(uids)
		if err != nil {
			return err
		}
		for _, m := range ms {
			m.unread = !read
		}
		p.record(Event{Op: "SetRead", User: a.address, Folder: name, UIDs: uidsOf(ms), Read: read})
		return nil
	})
}

// Copy files copies of messages in dest under new UIDs, given in the
// order of the source UIDs, read state included. Copying into the same
// folder duplicates the messages, as IMAP COPY does.
func (p *Provider) Copy(ctx context.Context, auth upstream.Auth, name, dest string, uids []int64) error {
	return p.transfer(ctx, "Copy", "CopyMessagesByUIDs", auth, name, dest, uids, false)
}

// Move moves messages to dest under new UIDs; into the same folder is
// refused.
func (p *Provider) Move(ctx context.Context, auth upstream.Auth, name, dest string, uids []int64) error {
	return p.transfer(ctx, "Move", "MoveMessagesByUIDs", auth, name, dest, uids, true)
}

func (p *Provider) transfer(ctx context.Context, method, restOp string, auth upstream.Auth, name, dest string, uids []int64, move bool) error {
	if len(uids) == 0 {
		p.nothing(method)
		return nil
	}
	return p.op(ctx, method, restOp, true, auth, func(a *account) error {
		src, err := a.folder(name)
		if err != nil {
			return err
		}
		if err := validateFolderName(dest); err != nil {
			return err
		}
		if move && dest == name {
			return errInvalid("source and destination folder are the same")
		}
		df, err := a.folder(dest)
		if err != nil {
			return err
		}
		ms, err := src.require(uids)
		if err != nil {
			return err
		}
		e := Event{Op: method, User: a.address, Folder: name, Dest: dest, UIDs: uidsOf(ms)}
		for _, m := range ms {
			c := df.insert(m.raw, m.unread, m.received, "")
			e.New = append(e.New, c.uid)
		}
		if move {
			src.remove(ms)
		}
		p.record(e)
		return nil
	})
}

// Delete moves messages to INBOX.Trash (made again if a user removed
// it), remembering where they came from, or removes them for good. In
// INBOX.Trash both remove them: there is nowhere further to go.
func (p *Provider) Delete(ctx context.Context, auth upstream.Auth, name string, uids []int64, forever bool) error {
	if len(uids) == 0 {
		p.nothing("Delete")
		return nil
	}
	return p.op(ctx, "Delete", "DeleteMessagesByUIDs", true, auth, func(a *account) error {
		f, err := a.folder(name)
		if err != nil {
			return err
		}
		ms, err := f.require(uids)
		if err != nil {
			return err
		}
		e := Event{Op: "Delete", User: a.address, Folder: name, UIDs: uidsOf(ms), Forever: forever || name == Trash}
		if !e.Forever {
			trash := a.ensureFolder(Trash)
			e.Dest = Trash
			for _, m := range ms {
				c := trash.insert(m.raw, m.unread, m.received, name)
				e.New = append(e.New, c.uid)
			}
		}
		f.remove(ms)
		p.record(e)
		return nil
	})
}
