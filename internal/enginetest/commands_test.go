package enginetest

import (
	"slices"

	"github.com/emersion/go-imap/v2"
	"github.com/emersion/go-imap/v2/imapclient"
)

// The commands a session sends. Each records itself (session.do), has
// its answer checked at once (checks_test.go), and updates what the
// session knows.

// codeExpungeIssued is RFC 9051's EXPUNGEISSUED: a command named a
// message expunged meanwhile (RFC 2180 §4.1 allows NO then).
const codeExpungeIssued imap.ResponseCode = "EXPUNGEISSUED"

// appendMessage appends a new message, to the selected folder mostly,
// with \Seen and the session's keyword or not.
func (s *session) appendMessage() {
	folder := s.folder
	if s.rng.IntN(10) < 3 {
		folder = s.otherFolder(true)
	}
	var flags []imap.Flag
	if s.rng.IntN(3) == 0 {
		flags = append(flags, imap.FlagSeen)
	}
	if s.rng.IntN(3) == 0 {
		flags = append(flags, s.kw)
	}
	id := s.r.newModelID()
	raw := newMessage(id, s.rng)
	rec := &record{cmd: "APPEND", folder: folder, flags: flags, modelID: id}
	s.do(rec, func() error {
		cmd := s.c.Append(folder, int64(len(raw)), &imap.AppendOptions{Flags: flags})
		_, werr := cmd.Write(raw)
		cerr := cmd.Close()
		data, err := cmd.Wait()
		if err == nil && data != nil {
			rec.appendUID, rec.validity = data.UID, data.UIDValidity
		}
		if err == nil {
			err = werr
		}
		if err == nil {
			err = cerr
		}
		return err
	})
	s.r.checkAnswer(rec)
	if rec.ok() && rec.appendUID != 0 {
		s.r.checkValidity(s, folder, rec.validity)
		s.r.checkNewUID(s, rec, folder, rec.appendUID)
		s.learn(instKey{s.user, folder, rec.appendUID}, present(slices.Contains(flags, s.kw)), rec)
	}
}

// storeFlag adds or removes one flag on some messages of the last LOOK.
func (s *session) storeFlag(flag imap.Flag, op imap.StoreFlagsOp) {
	uids := s.pickUIDs()
	if len(uids) == 0 {
		return
	}
	s.store(uids, flag, op)
}

func (s *session) store(uids []imap.UID, flag imap.Flag, op imap.StoreFlagsOp) *record {
	rec := &record{cmd: "STORE", uids: uids, storeOp: op, flags: []imap.Flag{flag}}
	s.do(rec, func() error {
		return s.c.Store(imap.UIDSetNum(uids...), &imap.StoreFlags{Op: op, Flags: rec.flags}, nil).Close()
	})
	s.r.checkAnswer(rec, codeExpungeIssued)
	if flag == s.kw {
		for _, u := range uids {
			st := kwUnknown
			if rec.ok() {
				st = present(op == imap.StoreFlagsAdd)
			}
			s.learn(instKey{s.user, s.folder, u}, st, rec)
		}
	}
	return rec
}

// fetchBodies fetches whole messages, marking them read unless peek.
func (s *session) fetchBodies(peek bool) {
	uids := s.pickUIDs()
	if len(uids) == 0 {
		return
	}
	sec := &imap.FetchItemBodySection{Peek: peek}
	rec := &record{cmd: "FETCH", uids: uids, peek: peek}
	s.do(rec, func() error {
		msgs, err := s.c.Fetch(imap.UIDSetNum(uids...), &imap.FetchOptions{UID: true, Flags: true,
			BodySection: []*imap.FetchItemBodySection{sec}}).Collect()
		rec.fetched = collect(msgs, sec)
		return err
	})
	// No NO: a message that vanished is left out and the others are
	// answered (RFC 2180 §4.1.2).
	s.r.checkAnswer(rec)
	s.r.checkFetch(s, rec)
}

// transfer copies or moves messages to the user's other folder.
func (s *session) transfer(move bool) {
	uids := s.pickUIDs()
	if len(uids) == 0 {
		return
	}
	dest := s.otherFolder(true)
	rec := &record{cmd: "COPY", uids: uids, dest: dest}
	if move {
		rec.cmd = "MOVE"
	}
	set := imap.UIDSetNum(uids...)
	s.do(rec, func() error {
		var src, dst imap.NumSet
		var err error
		if move {
			var data *imapclient.MoveData
			if data, err = s.c.Move(set, dest).Wait(); err == nil && data != nil {
				src, dst, rec.validity = data.SourceUIDs, data.DestUIDs, data.UIDValidity
			}
		} else {
			var data *imap.CopyData
			if data, err = s.c.Copy(set, dest).Wait(); err == nil && data != nil {
				src, dst, rec.validity = data.SourceUIDs, data.DestUIDs, data.UIDValidity
			}
		}
		rec.copied = pairs(src, dst)
		return err
	})
	s.r.checkAnswer(rec, codeExpungeIssued)
	if len(rec.copied) > 0 {
		s.r.checkValidity(s, dest, rec.validity)
	}
	for from, to := range rec.copied {
		s.r.checkNewUID(s, rec, dest, to)
		// The session's own stores are over: its keyword went along.
		if o, ok := s.own[instKey{s.user, s.folder, from}]; ok {
			s.learn(instKey{s.user, dest, to}, o.state, rec)
		}
	}
}

// pairs reads COPYUID's two sets, which name the copies in the same
// order.
func pairs(src, dst imap.NumSet) map[imap.UID]imap.UID {
	ss, ok1 := src.(imap.UIDSet)
	ds, ok2 := dst.(imap.UIDSet)
	if !ok1 || !ok2 {
		return nil
	}
	from, ok1 := ss.Nums()
	to, ok2 := ds.Nums()
	if !ok1 || !ok2 || len(from) != len(to) {
		return nil
	}
	out := make(map[imap.UID]imap.UID, len(from))
	for i := range from {
		out[from[i]] = to[i]
	}
	return out
}

// deleteSome marks one or two messages \Deleted and expunges, with UID
// EXPUNGE of those or a plain EXPUNGE (which takes every \Deleted
// message, other sessions' too).
func (s *session) deleteSome() {
	if len(s.view) == 0 {
		return
	}
	uids := []imap.UID{s.view[s.rng.IntN(len(s.view))].uid}
	if s.rng.IntN(3) == 0 {
		uids = append(uids, s.view[s.rng.IntN(len(s.view))].uid)
	}
	slices.Sort(uids)
	uids = slices.Compact(uids)
	s.store(uids, imap.FlagDeleted, imap.StoreFlagsAdd)
	rec := &record{cmd: "EXPUNGE"}
	if s.rng.IntN(2) == 0 {
		rec.cmd, rec.uids = "UID EXPUNGE", uids
	}
	s.do(rec, func() error {
		if rec.uids != nil {
			return s.c.UIDExpunge(imap.UIDSetNum(uids...)).Close()
		}
		return s.c.Expunge().Close()
	})
	s.r.checkAnswer(rec)
}

// selectFolder selects a folder.
func (s *session) selectFolder(folder string) {
	rec := &record{cmd: "SELECT", folder: folder}
	s.do(rec, func() error {
		data, err := s.c.Select(folder, nil).Wait()
		if err == nil && data != nil {
			rec.validity = data.UIDValidity
		}
		return err
	})
	s.r.checkAnswer(rec)
	s.view = nil
	s.folder = ""
	if rec.ok() {
		s.folder = folder
		s.r.checkValidity(s, folder, rec.validity)
	}
}

func (s *session) noop() {
	rec := &record{cmd: "NOOP"}
	s.do(rec, func() error { return s.c.Noop().Wait() })
	s.r.checkAnswer(rec)
}

// lookSection is the header field the sessions list folders with, as
// Thunderbird and mbsync list them with theirs.
var lookSection = &imap.FetchItemBodySection{Specifier: imap.PartSpecifierHeader, HeaderFields: []string{modelHeader}, Peek: true}

// look lists the selected folder: every message's UID, flags and model
// id. The answer is checked (checkLook) and becomes the session's view.
func (s *session) look() {
	rec := &record{cmd: "LOOK"}
	s.do(rec, func() error {
		msgs, err := s.c.Fetch(imap.UIDSet{{Start: 1, Stop: 0}}, &imap.FetchOptions{UID: true, Flags: true,
			BodySection: []*imap.FetchItemBodySection{lookSection}}).Collect()
		rec.fetched = collect(msgs, lookSection)
		return err
	})
	s.r.checkAnswer(rec)
	s.view = s.r.checkLook(s, rec)
}

// collect keeps the FETCH responses by UID.
func collect(msgs []*imapclient.FetchMessageBuffer, sec *imap.FetchItemBodySection) map[imap.UID]fetchedMsg {
	out := make(map[imap.UID]fetchedMsg, len(msgs))
	for _, m := range msgs {
		out[m.UID] = fetchedMsg{seq: m.SeqNum, flags: m.Flags, body: m.FindBodySection(sec)}
	}
	return out
}
