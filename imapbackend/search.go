package imapbackend

import (
	"cmp"
	"context"
	"slices"
	"strings"
	"time"
	"unicode"

	"github.com/emersion/go-imap/v2"
	"github.com/emersion/go-imap/v2/imapserver"

	"github.com/directbridge/directbridge/internal/mailstore"
	"github.com/directbridge/directbridge/internal/mimeconv"
	"github.com/directbridge/directbridge/internal/seqview"
	"github.com/directbridge/directbridge/upstream/directapi"
)

// Search answers SEARCH and UID SEARCH (RFC 9051 §6.4.4) with every search
// key, ESEARCH result options (RFC 4731) and SEARCHRES (RFC 5182).
//
// Keys are evaluated in three-valued logic (match, no match, unknown yet),
// in stages that each fetch only what the remaining candidates need:
//
//  1. flags, UIDs and sequence numbers, plus whatever is already loaded:
//     no REST call;
//  2. dates, sizes and header keys: one GetMessageMetaData for the folder,
//     only if its metadata is not loaded yet;
//  3. BODY and TEXT: the raw bytes of the candidates still undecided (the
//     cache first, then GetRawMessagesByUIDs batches), so `UNSEEN BODY x`
//     downloads unread messages only.
//
// The provider's GetMessagesBySender/BySubject/ByReceivedDate operations
// are not used: one metadata call already answers every header and date
// key for the whole folder, and their matching rules (which header, which
// decoding, which time zone, inclusive ends) are not specified, so they
// could change results.
//
// Results never include a message this connection has not been told about
// (no EXISTS yet), for SEARCH and UID SEARCH alike, so that SEARCHRES and
// later commands never name a message the client does not know. A message
// whose needed data the provider no longer has is left out, as RFC 2180
// allows for messages another client expunged, and a refresh queues its
// EXPUNGE; keys that need no data (flags, numbers) still match it.
func (s *session) Search(kind imapserver.NumKind, criteria *imap.SearchCriteria, options *imap.SearchOptions) (*imap.SearchData, error) {
	if s.sel == nil {
		return nil, bad(imap.ResponseCodeClientBug, "No mailbox selected")
	}
	m := s.sel
	// "*" and "$" are resolved first: "$" is the saved result from before
	// this command (RFC 5182 §2.1).
	crit := s.staticCriteria(criteria)
	var cands []*searchMsg
	if n := s.view.NumMessages(); n > 0 {
		ts, err := s.targets(imap.SeqSet{{Start: 1, Stop: n}})
		if err != nil {
			return nil, err
		}
		for _, t := range ts {
			if !t.live {
				continue // expunged, the client not told yet (RFC 2180 §4.3)
			}
			fl := s.flagsOf(t.msg.UID)
			meta, _ := m.MetaOf(t.msg)
			cands = append(cands, &searchMsg{seq: t.seq, msg: t.msg, seen: mailstore.HasSeen(fl), recent: s.view.IsRecent(t.msg.UID),
				flags: mailstore.KeptOf(fl), meta: meta})
		}
	}
	ref := m.Ref()
	if options.ReturnSave {
		// A failed SEARCH ... RETURN (SAVE) leaves "$" empty (RFC 5182 §2.1).
		s.searchRes = imap.UIDSet{}
	}

	ctx, cancel := s.ctx()
	defer cancel()
	matched, gone, err := s.searchEval(ctx, crit, cands, ref)
	if err != nil {
		return nil, imapError(err)
	}
	if gone {
		if err := m.Sync(ctx); err != nil {
			s.srv.cfg.Logger.Warn("imap refresh after expunged message failed", "err", err)
		}
	}
	data := searchData(kind, matched)
	if options.ReturnSave {
		s.searchRes = savedResult(matched, options)
	}
	return data, nil
}

// searchEval runs the stages and returns the matching candidates in order.
func (s *session) searchEval(ctx context.Context, crit *imap.SearchCriteria, cands []*searchMsg, ref mailstore.FolderRef) (matched []*searchMsg, gone bool, err error) {
	var pending []*searchMsg
	eval := func(list []*searchMsg) {
		pending = pending[:0]
		for _, sm := range list {
			sm.wantMeta, sm.wantRaw = false, false
			switch sm.eval(crit) {
			case triTrue:
				matched = append(matched, sm)
			case triUnknown:
				pending = append(pending, sm)
			}
		}
	}
	eval(cands)

	// Stage 2: metadata.
	var want []*mailstore.Message
	for _, sm := range pending {
		if sm.wantMeta && sm.meta == nil {
			want = append(want, sm.msg)
		}
	}
	if len(want) > 0 {
		if err := s.ensureMeta(ctx, want); err != nil {
			return nil, false, err
		}
		for _, sm := range pending {
			sm.meta, _ = s.sel.MetaOf(sm.msg)
		}
		eval(append([]*searchMsg(nil), pending...))
	}

	// Stage 3: raw bytes, for what is still undecided and can be decided
	// by them; the rest lacks data the provider no longer has.
	var rest []*searchMsg
	for _, sm := range pending {
		if sm.wantRaw {
			rest = append(rest, sm)
		} else {
			gone = true
		}
	}
	// The raw bytes of a message answer its size exactly; sizes from the
	// cache save a download.
	for _, sm := range rest {
		if raw, ok := s.srv.bodies.Cached(ref, sm.msg.UID); ok {
			sm.raw = raw
		}
	}
	batch := mailstore.BatchSize
	for start := 0; start < len(rest); start += batch {
		chunk := rest[start:min(start+batch, len(rest))]
		var need []*mailstore.Message
		for _, sm := range chunk {
			if sm.raw == nil {
				need = append(need, sm.msg)
			}
		}
		if len(need) > 0 {
			got, err := s.raws(ctx, need)
			if err != nil {
				return nil, false, err
			}
			for _, sm := range chunk {
				if sm.raw == nil {
					sm.raw = got[sm.msg.UID]
				}
			}
		}
		for _, sm := range chunk {
			if sm.raw == nil {
				gone = true
				continue
			}
			sm.wantMeta, sm.wantRaw = false, false
			switch sm.eval(crit) {
			case triTrue:
				matched = append(matched, sm)
			case triUnknown:
				gone = true // metadata the provider no longer has
			}
			sm.raw, sm.texts = nil, nil // bounded memory on large folders
		}
	}
	// Stages appended out of order: restore the folder's order (by
	// session sequence number, which is also UID order).
	slices.SortFunc(matched, func(a, b *searchMsg) int { return cmp.Compare(a.seq, b.seq) })
	return matched, gone, nil
}

// searchData is the result in the form the command wants: sequence
// numbers or UIDs, with MIN, MAX and COUNT for ESEARCH (RFC 4731 §3.1).
// go-imap writes only what was asked for.
func searchData(kind imapserver.NumKind, matched []*searchMsg) *imap.SearchData {
	data := &imap.SearchData{Count: uint32(len(matched))}
	if kind == imapserver.NumKindUID {
		uids := imap.UIDSet{}
		for _, sm := range matched {
			uids.AddNum(sm.msg.UID)
		}
		data.All = uids
		if len(matched) > 0 {
			data.Min, data.Max = uint32(matched[0].msg.UID), uint32(matched[len(matched)-1].msg.UID)
		}
		return data
	}
	seqs := imap.SeqSet{}
	for _, sm := range matched {
		seqs.AddNum(sm.seq)
	}
	data.All = seqs
	if len(matched) > 0 {
		data.Min, data.Max = matched[0].seq, matched[len(matched)-1].seq
	}
	return data
}

// savedResult is what RETURN (SAVE) keeps in "$" (RFC 5182 §2.4): with
// MIN and/or MAX and neither ALL nor COUNT, only those messages; otherwise
// all matches. Always UIDs, so that "$" survives expunges.
func savedResult(matched []*searchMsg, o *imap.SearchOptions) imap.UIDSet {
	out := imap.UIDSet{}
	if len(matched) == 0 {
		return out
	}
	if (o.ReturnMin || o.ReturnMax) && !o.ReturnAll && !o.ReturnCount {
		if o.ReturnMin {
			out.AddNum(matched[0].msg.UID)
		}
		if o.ReturnMax {
			out.AddNum(matched[len(matched)-1].msg.UID)
		}
		return out
	}
	for _, sm := range matched {
		out.AddNum(sm.msg.UID)
	}
	return out
}

// staticCriteria copies criteria with "*" and "$" replaced by what they
// stand for now.
func (s *session) staticCriteria(c *imap.SearchCriteria) *imap.SearchCriteria {
	out := *c
	out.SeqNum = make([]imap.SeqSet, len(c.SeqNum))
	for i, set := range c.SeqNum {
		out.SeqNum[i], _ = s.staticNumSet(set).(imap.SeqSet)
	}
	out.UID = make([]imap.UIDSet, len(c.UID))
	for i, set := range c.UID {
		out.UID[i], _ = s.staticNumSet(set).(imap.UIDSet)
	}
	out.Not = make([]imap.SearchCriteria, len(c.Not))
	for i := range c.Not {
		out.Not[i] = *s.staticCriteria(&c.Not[i])
	}
	out.Or = make([][2]imap.SearchCriteria, len(c.Or))
	for i := range c.Or {
		out.Or[i] = [2]imap.SearchCriteria{*s.staticCriteria(&c.Or[i][0]), *s.staticCriteria(&c.Or[i][1])}
	}
	return &out
}

// tri is a three-valued truth: a key whose data is not loaded yet is
// unknown, and AND, OR and NOT keep unknown where it matters.
type tri int8

const (
	triFalse tri = iota
	triTrue
	triUnknown
)

func triFrom(b bool) tri {
	if b {
		return triTrue
	}
	return triFalse
}

func (t tri) not() tri {
	switch t {
	case triTrue:
		return triFalse
	case triFalse:
		return triTrue
	}
	return triUnknown
}

// searchMsg is one message during a SEARCH: a snapshot of its state and
// the data loaded for it so far.
type searchMsg struct {
	seq    uint32 // this connection's sequence number
	msg    *mailstore.Message
	seen   bool
	recent bool // \Recent in this session
	flags  []imap.Flag
	meta   *directapi.MessageDetail
	raw    []byte

	// What an unknown result waits for.
	wantMeta, wantRaw bool

	texts *searchTexts // BODY and TEXT material, from raw
}

// eval is criteria against the message with what is loaded. Every key is
// evaluated even after an unknown one, so that wantMeta and wantRaw name
// everything the message needs; a definite no ends early.
func (sm *searchMsg) eval(c *imap.SearchCriteria) tri {
	res := triTrue
	and := func(t tri) bool {
		switch t {
		case triFalse:
			res = triFalse
			return true
		case triUnknown:
			res = triUnknown
		}
		return false
	}
	for _, set := range c.SeqNum {
		if !set.Contains(sm.seq) {
			return triFalse
		}
	}
	for _, set := range c.UID {
		if !set.Contains(sm.msg.UID) {
			return triFalse
		}
	}
	for _, f := range c.Flag {
		if !sm.hasFlag(f) {
			return triFalse
		}
	}
	for _, f := range c.NotFlag {
		if sm.hasFlag(f) {
			return triFalse
		}
	}
	if !c.Since.IsZero() || !c.Before.IsZero() {
		if and(sm.internalDateIn(c.Since, c.Before)) {
			return triFalse
		}
	}
	if c.Larger != 0 || c.Smaller != 0 {
		if and(sm.sizeIn(c.Larger, c.Smaller)) {
			return triFalse
		}
	}
	if !c.SentSince.IsZero() || !c.SentBefore.IsZero() {
		if and(sm.sentDateIn(c.SentSince, c.SentBefore)) {
			return triFalse
		}
	}
	for _, h := range c.Header {
		if and(sm.headerHas(h.Key, h.Value)) {
			return triFalse
		}
	}
	for _, b := range c.Body {
		if and(sm.bodyHas(b)) {
			return triFalse
		}
	}
	for _, t := range c.Text {
		if and(sm.textHas(t)) {
			return triFalse
		}
	}
	for i := range c.Not {
		if and(sm.eval(&c.Not[i]).not()) {
			return triFalse
		}
	}
	for i := range c.Or {
		a, b := sm.eval(&c.Or[i][0]), sm.eval(&c.Or[i][1])
		var t tri
		switch {
		case a == triTrue || b == triTrue:
			t = triTrue
		case a == triUnknown || b == triUnknown:
			t = triUnknown
		}
		if and(t) {
			return triFalse
		}
	}
	return res
}

// hasFlag compares flags without case (RFC 9051 §2.3.2). \Recent is the
// session's own (RECENT, NEW and OLD, RFC 3501 §6.4.4).
func (sm *searchMsg) hasFlag(f imap.Flag) bool {
	if equalFold(string(f), string(seqview.FlagRecent)) {
		return sm.recent
	}
	f = mailstore.CanonicalFlag(f)
	switch f {
	case imap.FlagSeen:
		return sm.seen
	}
	for _, x := range sm.flags {
		if equalFold(string(x), string(f)) {
			return true
		}
	}
	return false
}

// internalDateIn is SINCE/BEFORE/ON: the INTERNALDATE's date in UTC, the
// zone FETCH shows it in, against the given dates (RFC 9051 §6.4.4:
// "disregarding time and timezone").
func (sm *searchMsg) internalDateIn(since, before time.Time) tri {
	if !mailstore.MetaKnown(sm.meta) {
		if sm.meta == nil {
			sm.wantMeta = true
		}
		return triUnknown
	}
	return triFrom(dateWithin(internalDate(sm.meta), since, before))
}

// dateWithin compares the calendar date of t, in t's own zone, with since
// (inclusive) and before (exclusive).
func dateWithin(t, since, before time.Time) bool {
	d := calendarDate(t)
	if !since.IsZero() && d.Before(calendarDate(since)) {
		return false
	}
	if !before.IsZero() && !d.Before(calendarDate(before)) {
		return false
	}
	return true
}

func calendarDate(t time.Time) time.Time {
	y, m, d := t.Date()
	return time.Date(y, m, d, 0, 0, 0, 0, time.UTC)
}

// sizeIn is LARGER/SMALLER on RFC822.SIZE, with the same sources as FETCH
// RFC822.SIZE so the two agree: the raw bytes when in hand or cached, the
// metadata's size otherwise. (go-imap v2.0.0-beta.8 loses a SMALLER that
// is followed by LARGER or a date key in the same list while parsing, in
// imap.SearchCriteria.And; what arrives here is evaluated as given.)
func (sm *searchMsg) sizeIn(larger, smaller int64) tri {
	var size int64
	switch {
	case sm.raw != nil:
		size = int64(len(sm.raw))
	case mailstore.MetaKnown(sm.meta) && sm.meta.Size >= 0:
		size = int64(sm.meta.Size)
	default:
		if sm.meta == nil {
			sm.wantMeta = true
		} else {
			sm.wantRaw = true
		}
		return triUnknown
	}
	return triFrom((larger == 0 || size > larger) && (smaller == 0 || size < smaller))
}

// headers is the top-level header list, as FETCH ENVELOPE reads it.
func (sm *searchMsg) headers() ([]directapi.MessageHeader, bool) {
	hs, ok := topHeaders(sm.meta, sm.raw)
	if !ok {
		if sm.meta == nil {
			sm.wantMeta = true
		} else {
			sm.wantRaw = true
		}
	}
	return hs, ok
}

// sentDateIn is SENTSINCE/SENTBEFORE/SENTON: the date of the Date header
// as written, in its own zone (RFC 9051 §6.4.4), read as ENVELOPE reads it.
// When the field cannot be read, the provider's sent date (from its own,
// possibly more lenient parser) is used in UTC; a message with no sent
// date at all matches none of them.
func (sm *searchMsg) sentDateIn(since, before time.Time) tri {
	hs, ok := sm.headers()
	if !ok {
		return triUnknown
	}
	if t := headerOf(hs).Envelope().Date; !t.IsZero() {
		return triFrom(dateWithin(t, since, before))
	}
	if mailstore.MetaKnown(sm.meta) && !sm.meta.SentDate.IsZero() {
		return triFrom(dateWithin(sm.meta.SentDate.UTC(), since, before))
	}
	return triFalse
}

// headerHas is HEADER, FROM, TO, CC, BCC and SUBJECT: a field of that name
// whose decoded value contains the string, or for an address field one of
// whose addresses ("Name <mailbox@host>") does; an empty string asks only
// that the field be there (RFC 9051 §6.4.4).
func (sm *searchMsg) headerHas(name, value string) tri {
	hs, ok := sm.headers()
	if !ok {
		return triUnknown
	}
	want := searchFold(value)
	address := isAddressField(name)
	for _, h := range hs {
		if !equalFold(h.Name, name) {
			continue
		}
		if want == "" || strings.Contains(searchFold(mimeconv.DecodeWords(h.Value)), want) {
			return triTrue
		}
		if address {
			// The addresses themselves, whatever comments or quoting
			// the field has (imaptest's search-addresses).
			for _, a := range addressTexts(h.Value) {
				if strings.Contains(searchFold(a), want) {
					return triTrue
				}
			}
		}
	}
	return triFalse
}

// isAddressField tells the fields whose values are address lists.
func isAddressField(name string) bool {
	for _, f := range []string{"From", "To", "Cc", "Bcc", "Sender", "Reply-To"} {
		if equalFold(f, name) {
			return true
		}
	}
	return false
}

// bodyHas is BODY: the string in the decoded text of the body.
func (sm *searchMsg) bodyHas(s string) tri {
	if sm.raw == nil {
		sm.wantRaw = true
		return triUnknown
	}
	want := searchFold(s)
	for _, t := range sm.bodyTexts().body {
		if strings.Contains(t, want) {
			return triTrue
		}
	}
	return triFalse
}

// textHas is TEXT: the string in the header, the MIME headers of the parts
// or the body. Loaded metadata answers a match in the header without a
// download; it is not loaded for TEXT alone.
func (sm *searchMsg) textHas(s string) tri {
	want := searchFold(s)
	if sm.meta != nil || sm.raw != nil {
		if hs, ok := topHeaders(sm.meta, sm.raw); ok {
			for _, h := range hs {
				if strings.Contains(searchFold(h.Name+": "+mimeconv.DecodeWords(h.Value)), want) {
					return triTrue
				}
			}
		}
	}
	if sm.raw == nil {
		sm.wantRaw = true
		return triUnknown
	}
	t := sm.bodyTexts()
	for _, l := range [][]string{t.mimeHeaders, t.body} {
		for _, x := range l {
			if strings.Contains(x, want) {
				return triTrue
			}
		}
	}
	return triFalse
}

// searchFold folds case for substring matching, close to RFC 5051's
// i;unicode-casemap (without its normalisation): upper then lower case,
// so that e.g. "ſ" and "S" and "s" meet.
func searchFold(s string) string {
	return strings.Map(func(r rune) rune { return unicode.ToLower(unicode.ToUpper(r)) }, s)
}

// searchTexts is the searchable text of a message, case-folded: the
// decoded text parts (and the headers of attached messages, which are
// body text of the message that carries them), and the MIME headers of
// its parts.
type searchTexts struct {
	body        []string
	mimeHeaders []string
}

func (sm *searchMsg) bodyTexts() *searchTexts {
	if sm.texts == nil {
		sm.texts = &searchTexts{}
		root, _ := mimeconv.ParseTree(sm.raw, mimeconv.ParseOptions{}) // cut short beyond the limits, still whole
		sm.texts.collect(root, true)
	}
	return sm.texts
}

// collect gathers the text of one part of the message tree: text/* leaves
// decoded (transfer encoding and charset), multiparts part by part,
// attached messages with their headers. Other leaves (images, PDFs, ...)
// hold no text to search. top is a message, whose header is not a MIME
// header: the message's own header matches TEXT separately, and an
// attached message's header is body text of the message that carries it.
// The tree's depth is bounded, and so is the recursion.
func (t *searchTexts) collect(p *mimeconv.Part, top bool) {
	if !top {
		for _, f := range p.Header {
			t.mimeHeaders = append(t.mimeHeaders, searchFold(f.Name+": "+mimeconv.DecodeWords(f.Value)))
		}
	}
	switch {
	case p.Children != nil:
		for _, c := range p.Children {
			t.collect(c, false)
		}
	case p.Message != nil:
		for _, f := range p.Message.Header {
			t.body = append(t.body, searchFold(f.Name+": "+mimeconv.DecodeWords(f.Value)))
		}
		t.collect(p.Message, true)
	case p.Type == "text":
		t.body = append(t.body, searchFold(p.Text()))
	}
}
