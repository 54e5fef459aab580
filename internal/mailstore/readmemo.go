package mailstore

import (
	"github.com/emersion/go-imap/v2"
)

// The provider reports read state only as the list of unread messages,
// whole (GetUnreadMessages), which is the dearest read there is on a
// large folder. A mirror forgotten after Config.Idle would pay for it
// again at the next SELECT; instead, what it knew of the read state is
// kept as a memo (the unread UIDs, as ranges: a few bytes, no message
// content), and the next load infers the read state from it when the
// provider's unread count agrees: the memo's unread messages still there,
// plus every message newer than the memo, unread. As with polls, a change
// made elsewhere meanwhile that keeps the count (one message read, another
// marked unread) shows at the next change of the count.

// readMemo is what a forgotten mirror knew of the read state.
type readMemo struct {
	validity uint32
	newest   imap.UID    // the largest UID the mirror knew
	unread   imap.UIDSet // of those, the unread ones
}

// maxMemos bounds the memos kept; past it they are all forgotten (a lost
// memo costs one GetUnreadMessages).
const maxMemos = 10000

// memoLocked returns the mirror's read state as a memo. Called with m.mu
// held.
func (m *Folder) memoLocked() *readMemo {
	if !m.loaded || m.mb == nil || m.gone != nil {
		return nil
	}
	memo := &readMemo{validity: m.validity}
	for _, u := range m.mb.UIDs() {
		memo.newest = u
		if fl, ok := m.mb.Flags(u); ok && !HasSeen(fl) {
			memo.unread.AddNum(u)
		}
	}
	return memo
}

// saveMemo keeps the memo of a mirror being forgotten.
func (st *Store) saveMemo(user, name string, memo *readMemo) {
	if memo == nil {
		return
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	if len(st.memos) >= maxMemos {
		clear(st.memos)
	}
	st.memos[mirrorKey(user, name)] = memo
}

// takeMemo returns and forgets the memo of a folder under validity.
func (st *Store) takeMemo(user, name string, validity uint32) *readMemo {
	st.mu.Lock()
	defer st.mu.Unlock()
	memo := st.memos[mirrorKey(user, name)]
	delete(st.memos, mirrorKey(user, name))
	if memo == nil || memo.validity != validity {
		return nil
	}
	return memo
}

// infer returns the unread set of a folder now listing uids with unread
// unread messages, when the memo accounts for exactly that many, else nil.
func (memo *readMemo) infer(uids []imap.UID, unread int) map[imap.UID]bool {
	set := make(map[imap.UID]bool, unread)
	for _, u := range uids {
		if u > memo.newest || memo.unread.Contains(u) {
			set[u] = true
		}
	}
	if len(set) != unread {
		return nil
	}
	return set
}
