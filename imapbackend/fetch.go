package imapbackend

import (
	"bytes"
	"context"
	"slices"
	"strings"
	"time"

	"github.com/emersion/go-imap/v2"
	"github.com/emersion/go-imap/v2/imapserver"

	"github.com/directbridge/directbridge/internal/mailstore"
	"github.com/directbridge/directbridge/internal/mimeconv"
	"github.com/directbridge/directbridge/upstream/directapi"
)

// fetchNeeds says what one FETCH command needs from the provider, decided
// once per command so that the REST cost is a small constant: one
// GetMessageMetaData for the whole folder (and only when its metadata is
// not loaded yet), GetRawMessagesByUIDs batches for the messages whose
// bytes are needed and not cached, and one MarkMessagesAsReadByUIDs batch
// for the messages read by this command.
type fetchNeeds struct {
	// raw: BODYSTRUCTURE, BODY and BINARY sections need the message bytes,
	// except top-level HEADER.FIELDS, which metadata answers.
	raw bool
	// headers: ENVELOPE and top-level HEADER.FIELDS(.NOT) are built from
	// the header list of the metadata (the raw bytes if the provider
	// leaves the list out).
	headers bool
	// markSeen: BODY[...] without .PEEK, RFC822, RFC822.TEXT and BINARY
	// without .PEEK set \Seen (RFC 9051 §6.4.5, RFC 3516 §4.2).
	markSeen bool
}

// planFetch decides the needs of a FETCH and refuses what the protocol
// forbids before any REST call is made.
func planFetch(o *imap.FetchOptions) (fetchNeeds, error) {
	var n fetchNeeds
	if o.ModSeq || o.ChangedSince != 0 {
		return n, no(imap.ResponseCodeCannot, "MODSEQ and CHANGEDSINCE need CONDSTORE, which this server does not offer")
	}
	n.headers = o.Envelope
	n.raw = o.BodyStructure != nil || len(o.BinarySection) > 0 || len(o.BinarySectionSize) > 0
	for _, bs := range o.BodySection {
		if !validPart(bs.Part) {
			return n, errBadPart
		}
		if bs.Specifier == imap.PartSpecifierMIME && len(bs.Part) == 0 {
			// RFC 9051 §6.4.5: "The MIME part specifier MUST be prefixed
			// by one or more numeric part specifiers."
			return n, bad(imap.ResponseCodeClientBug, "BODY[MIME] needs a part number, as in BODY[1.MIME]")
		}
		if isTopHeaderFields(bs) {
			n.headers = true
		} else {
			n.raw = true
		}
		if !bs.Peek {
			n.markSeen = true
		}
	}
	for _, bs := range o.BinarySectionSize {
		if !validPart(bs.Part) {
			return n, errBadPart
		}
	}
	for _, bs := range o.BinarySection {
		if !validPart(bs.Part) {
			return n, errBadPart
		}
		if !bs.Peek {
			n.markSeen = true
		}
	}
	return n, nil
}

// validPart checks section part numbers: go-imap's parser takes any
// number, RFC 3501 §9 section-part has nz-number only.
func validPart(part []int) bool {
	for _, p := range part {
		if p < 1 {
			return false
		}
	}
	return true
}

// isTopHeaderFields reports BODY[HEADER.FIELDS (...)] and
// BODY[HEADER.FIELDS.NOT (...)] of the message itself. Clients list
// folders with them (Thunderbird, mbsync, offlineimap), so they are served
// from the metadata header list without downloading messages. Their bytes
// are "Name: value" lines with the values unfolded as the provider gives
// them; the same list and the same writer are used whatever the source, so
// a section always has the same bytes.
func isTopHeaderFields(bs *imap.FetchItemBodySection) bool {
	return len(bs.Part) == 0 && bs.Specifier == imap.PartSpecifierHeader &&
		(len(bs.HeaderFields) > 0 || len(bs.HeaderFieldsNot) > 0)
}

// fetchMsg is one message of a FETCH on its way from the provider to the
// client.
type fetchMsg struct {
	target
	meta     *directapi.MessageDetail // snapshot, nil when not needed
	raw      []byte                   // nil when not needed or not available
	needRaw  bool
	gone     bool // needed data no longer exists at the provider
	nowSeen  bool // this command set \Seen: FLAGS goes with the answer
	flags    []imap.Flag
	hdrs     []directapi.MessageHeader
	hdrsDone bool

	// rendered items
	date     time.Time
	size     int64
	env      *imap.Envelope
	bs       imap.BodyStructure
	sections [][]byte
	binaries [][]byte
	binSizes []uint32
}

// Fetch answers FETCH and UID FETCH (RFC 9051 §6.4.5, RFC 3516 BINARY).
//
// All REST calls are made before the first response of a batch is
// written: go-imap's FetchWriter holds the connection's write lock while a
// message's response is open, and a slow provider must not stall the
// connection mid-response. Cost: `UID FETCH 1:* (UID FLAGS)` makes no
// call; INTERNALDATE, RFC822.SIZE, ENVELOPE and top-level HEADER.FIELDS
// make one GetMessageMetaData for the whole folder the first time and
// none afterwards; body items make GetRawMessagesByUIDs batches for the
// messages not in the raw cache. Messages are processed in batches of the
// client's batch size so memory stays bounded on large folders.
//
// A message expunged while the client still sees it (RFC 2180 §4.1) is
// answered with what the bridge still has of it: its UID and last flags
// always, metadata and bytes when they were loaded or cached before; no
// REST call is made for it. When requested data is missing, for such a
// message or for one that the provider no longer has although the
// mirror has not noticed yet, it gets no response; the other messages are
// answered and the command ends with NO [EXPUNGEISSUED] (RFC 9051 §7.1),
// after a refresh queues the EXPUNGE. Nothing is made up for it.
func (s *session) Fetch(w *imapserver.FetchWriter, numSet imap.NumSet, options *imap.FetchOptions) error {
	if s.sel == nil {
		return bad(imap.ResponseCodeClientBug, "No mailbox selected")
	}
	needs, err := planFetch(options)
	if err != nil {
		return err
	}
	ts, err := s.targets(numSet)
	if err != nil {
		return err
	}
	var msgs []*fetchMsg
	for _, t := range ts {
		// A message the connection has not been told about (no EXISTS
		// yet) has no sequence number to answer with.
		if t.seq != 0 {
			msgs = append(msgs, &fetchMsg{target: t})
		}
	}
	if len(msgs) == 0 {
		return nil
	}
	ctx, cancel := s.ctx()
	defer cancel()

	if err := s.fetchMeta(ctx, msgs, options, needs); err != nil {
		return imapError(err)
	}
	batch := mailstore.BatchSize
	anyGone, refresh := false, false
	for start := 0; start < len(msgs); start += batch {
		chunk := msgs[start:min(start+batch, len(msgs))]
		// The read marking goes out with the download, not after it:
		// an uncached FETCH BODY[] costs one round trip of time, not two.
		// A message that vanished at the provider is left out of the
		// marking, and the others are marked and answered (RFC 2180
		// §4.1): mailstore.Folder.MarkRead.
		var marking chan error
		var marked []imap.UID
		if needs.markSeen && !s.readOnly {
			if toMark := s.unseen(chunk); len(toMark) > 0 {
				marking = make(chan error, 1)
				go func() {
					var merr error
					marked, merr = s.sel.MarkRead(ctx, s.auth, toMark, s.view)
					marking <- merr
				}()
			}
		}
		err := s.fetchRaws(ctx, chunk)
		if marking != nil {
			if merr := <-marking; err == nil && merr != nil {
				err = merr
			}
		}
		if err != nil {
			return imapError(err)
		}
		for _, fm := range chunk {
			if fm.gone {
				anyGone = true
				refresh = refresh || fm.live
				continue
			}
			if err := renderFetch(fm, options); err != nil {
				return err
			}
		}
		if len(marked) > 0 {
			s.showSeen(chunk, marked)
		}
		s.fetchFlags(chunk, options)
		if err := writeFetch(w, chunk, options); err != nil {
			return imapError(err)
		}
		for _, fm := range chunk {
			// Written: let the batch's bytes go before the next one.
			fm.raw, fm.sections, fm.binaries, fm.bs, fm.env, fm.hdrs = nil, nil, nil, nil, nil, nil
		}
	}
	if anyGone && refresh {
		// Let the EXPUNGE reach the client soon rather than at the next
		// poll; a failure leaves it to the poller. (Messages the mirror
		// knows are expunged have their EXPUNGE queued already.)
		if err := s.sel.Sync(ctx); err != nil {
			s.srv.cfg.Logger.Warn("imap refresh after expunged message failed", "err", err)
		}
	}
	// Messages deleted at the provider are left out of the answer and
	// the command ends OK (RFC 2180 §4.1.2): the others were answered,
	// and the EXPUNGE follows at the next command. A NO would make
	// clients (and imaptest) take the whole FETCH for failed.
	return nil
}

// fetchMeta loads metadata where the command needs it and takes a
// snapshot of it, then decides which messages need their raw bytes.
// RFC822.SIZE prefers the exact length of bytes already in hand or in the
// cache, so sizes agree with BODY[]; metadata's size is used otherwise.
func (s *session) fetchMeta(ctx context.Context, msgs []*fetchMsg, o *imap.FetchOptions, needs fetchNeeds) error {
	m := s.sel
	ref := m.Ref()
	var want []*mailstore.Message
	for _, fm := range msgs {
		if !fm.live {
			// Expunged: the provider has nothing more to give.
			if needs.raw || o.RFC822Size || needs.headers || o.InternalDate {
				if raw, ok := s.srv.bodies.Cached(ref, fm.msg.UID); ok {
					fm.raw = raw
				}
			}
			continue
		}
		if o.RFC822Size && !needs.raw {
			if raw, ok := s.srv.bodies.Cached(ref, fm.msg.UID); ok {
				fm.raw = raw
			}
		}
		if o.InternalDate || needs.headers || (o.RFC822Size && fm.raw == nil && !needs.raw) {
			want = append(want, fm.msg)
		}
	}
	if len(want) > 0 {
		if err := s.ensureMeta(ctx, want); err != nil {
			return err
		}
	}
	for _, fm := range msgs {
		var saved time.Time
		fm.meta, saved = m.MetaOf(fm.msg)
		if !mailstore.MetaKnown(fm.meta) && !saved.IsZero() {
			// Expunged (here or, a moment ago, at the provider) before its
			// metadata was loaded, but saved by this bridge: its bytes
			// are in the cache, its size and internal date are known (RFC
			// 2180 §4.1: a session not told yet may still fetch it), its
			// headers are in the bytes.
			if fm.raw == nil {
				fm.raw, _ = s.srv.bodies.Cached(ref, fm.msg.UID)
			}
			if fm.raw != nil {
				fm.meta = &directapi.MessageDetail{UID: int64(fm.msg.UID), Size: len(fm.raw), ReceivedDate: directapi.NewDate(saved)}
			}
		}
	}
	for _, fm := range msgs {
		known := mailstore.MetaKnown(fm.meta)
		switch {
		case needs.raw:
			fm.needRaw = true
		case needs.headers && !(known && len(fm.meta.Headers) > 0):
			fm.needRaw = true
		case o.RFC822Size && fm.raw == nil && !(known && fm.meta.Size >= 0):
			fm.needRaw = true
		}
		if o.InternalDate && !known {
			// Metadata asked for and not given: the message is gone at
			// the provider, and an INTERNALDATE cannot be made up.
			fm.gone = true
		}
	}
	return nil
}

// fetchRaws gets the raw bytes of the messages of a batch that need them,
// in one s.raws call (cache first, then GetRawMessagesByUIDs).
func (s *session) fetchRaws(ctx context.Context, chunk []*fetchMsg) error {
	var want []*mailstore.Message
	for _, fm := range chunk {
		if fm.needRaw && fm.raw == nil && !fm.gone {
			if !fm.live {
				fm.gone = true // expunged and not cached
				continue
			}
			want = append(want, fm.msg)
		}
	}
	if len(want) == 0 {
		return nil
	}
	got, err := s.raws(ctx, want)
	if err != nil {
		return err
	}
	for _, fm := range chunk {
		if fm.needRaw && fm.raw == nil && !fm.gone {
			if raw, ok := got[fm.msg.UID]; ok {
				fm.raw = raw
			} else {
				fm.gone = true
			}
		}
	}
	return nil
}

// unseen returns the UIDs of a batch's messages the command reads that
// are not \Seen yet: FETCH of BODY[] (not PEEK) and RFC822 sets \Seen
// (RFC 9051 §6.4.5), at the provider with one MarkMessagesAsReadByUIDs.
func (s *session) unseen(chunk []*fetchMsg) []imap.UID {
	var uids []imap.UID
	// After a read marking failed the mirror's \Seen may be wrong
	// (mailstore.Folder.ReadUnsure): every message is marked then.
	all := s.sel.ReadUnsure()
	for _, fm := range chunk {
		if !fm.gone && fm.live && (all || !mailstore.HasSeen(s.flagsOf(fm.msg.UID))) {
			uids = append(uids, fm.msg.UID)
		}
	}
	return uids
}

// showSeen notes on the messages of chunk that uids were just marked
// read: this connection's FETCH answer carries the new FLAGS (the mirror
// shows them already, and the other connections get FETCH FLAGS).
func (s *session) showSeen(chunk []*fetchMsg, uids []imap.UID) {
	marked := make(map[imap.UID]bool, len(uids))
	for _, u := range uids {
		marked[u] = true
	}
	for _, fm := range chunk {
		if !fm.gone && marked[fm.msg.UID] {
			fm.nowSeen = true
		}
	}
}

// fetchFlags takes the flags to answer with, canonical as the mirror keeps
// them (mbsync and offlineimap undo lower-case system flags), with
// \Recent where this session has it.
//
// A keyword this session has not been told of in FLAGS yet is left out
// here and the message's full FLAGS follow in the updates right after the
// command, FLAGS first (seqview.View.FetchFlags, RFC 9051 §7.3.5).
func (s *session) fetchFlags(chunk []*fetchMsg, o *imap.FetchOptions) {
	var uids []imap.UID
	var want []*fetchMsg
	for _, fm := range chunk {
		if o.Flags || fm.nowSeen {
			uids = append(uids, fm.msg.UID)
			want = append(want, fm)
		}
	}
	for i, fl := range s.view.FetchFlags(uids...) {
		want[i].flags = fl
	}
}

// internalDate is INTERNALDATE (RFC 9051 §2.3.3): when the provider
// received the message, else when it was sent, else the Unix epoch when
// the provider knows neither. Always UTC, so that SEARCH SINCE/BEFORE/ON,
// which compare dates only, agree with what FETCH shows.
func internalDate(d *directapi.MessageDetail) time.Time {
	switch {
	case d != nil && !d.ReceivedDate.IsZero():
		return d.ReceivedDate.UTC()
	case d != nil && !d.SentDate.IsZero():
		return d.SentDate.UTC()
	}
	return time.Unix(0, 0).UTC()
}

// topHeaders is the message's top-level header fields, names as written
// and values unfolded but not decoded: the provider's metadata list, or
// the same list read from the raw bytes by the message tree when the
// metadata has none (values made valid UTF-8, as the provider's are).
func topHeaders(meta *directapi.MessageDetail, raw []byte) ([]directapi.MessageHeader, bool) {
	if mailstore.MetaKnown(meta) && len(meta.Headers) > 0 {
		return meta.Headers, true
	}
	if raw == nil {
		return nil, false
	}
	root, _ := mimeconv.ParseTree(raw, mimeconv.ParseOptions{SkipBodies: true})
	hs := make([]directapi.MessageHeader, len(root.Header))
	for i, f := range root.Header {
		hs[i] = directapi.MessageHeader{Name: f.Name, Value: strings.ToValidUTF8(f.Value, "\uFFFD")}
	}
	return hs, true
}

// renderFetch computes every requested item of one message. It fails only
// for BINARY of a part whose transfer encoding is unknown, which RFC 3516
// §4.2 requires to fail with NO [UNKNOWN-CTE].
//
// The message is parsed once, into mimeconv's tree, and only when an item
// needs more than its whole bytes; the tree is bounded and tolerant of any
// input, so nothing here can fail on malformed mail.
func renderFetch(fm *fetchMsg, o *imap.FetchOptions) error {
	var root, top *mimeconv.Part
	// tree(true) is the whole tree; tree(false) may be the message's
	// header only, enough for BODY[HEADER] and BODY[TEXT], which clients
	// listing a folder ask for message after message.
	tree := func(whole bool) *mimeconv.Part {
		switch {
		case root != nil:
			return root
		case whole:
			root, _ = mimeconv.ParseTree(fm.raw, mimeconv.ParseOptions{}) // cut short beyond the limits, still whole
			return root
		case top == nil:
			top, _ = mimeconv.ParseTree(fm.raw, mimeconv.ParseOptions{SkipBodies: true})
		}
		return top
	}
	hdrs := func() []directapi.MessageHeader {
		if !fm.hdrsDone {
			fm.hdrs, _ = topHeaders(fm.meta, fm.raw)
			fm.hdrsDone = true
		}
		return fm.hdrs
	}
	if o.InternalDate {
		fm.date = internalDate(fm.meta)
	}
	if o.RFC822Size {
		if fm.raw != nil {
			fm.size = int64(len(fm.raw))
		} else {
			fm.size = int64(fm.meta.Size)
		}
	}
	if o.Envelope {
		fm.env = envelopeOf(headerOf(hdrs()))
	}
	if o.BodyStructure != nil {
		fm.bs = bodyStructureOf(tree(true))
	}
	fm.sections = make([][]byte, len(o.BodySection))
	for i, bs := range o.BodySection {
		if isTopHeaderFields(bs) {
			fm.sections[i] = sectionPartial(headerFieldsSection(hdrs(), bs), bs.Partial)
		} else {
			fm.sections[i] = bodySection(fm.raw, tree, bs)
		}
	}
	fm.binaries = make([][]byte, len(o.BinarySection))
	for i, bs := range o.BinarySection {
		b, err := binarySection(fm.raw, tree, bs.Part)
		if err != nil {
			return err
		}
		fm.binaries[i] = sectionPartial(b, bs.Partial)
	}
	fm.binSizes = make([]uint32, len(o.BinarySectionSize))
	for i, bs := range o.BinarySectionSize {
		b, err := binarySection(fm.raw, tree, bs.Part)
		if err != nil {
			return err
		}
		fm.binSizes[i] = uint32(min(len(b), mailstore.MaxUID))
	}
	return nil
}

// writeFetch writes the responses of a batch, one message's writer at a
// time (go-imap holds the connection's write lock until Close).
func writeFetch(w *imapserver.FetchWriter, chunk []*fetchMsg, o *imap.FetchOptions) error {
	for _, fm := range chunk {
		if fm.gone {
			continue
		}
		rw := w.CreateMessage(fm.seq)
		err := writeFetchItems(rw, fm, o)
		if cerr := rw.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return err
		}
	}
	return nil
}

func writeFetchItems(rw *imapserver.FetchResponseWriter, fm *fetchMsg, o *imap.FetchOptions) error {
	if o.UID {
		rw.WriteUID(fm.msg.UID)
	}
	if fm.flags != nil {
		rw.WriteFlags(fm.flags)
	}
	if o.InternalDate {
		rw.WriteInternalDate(fm.date)
	}
	if o.RFC822Size {
		rw.WriteRFC822Size(fm.size)
	}
	if o.Envelope {
		rw.WriteEnvelope(fm.env)
	}
	if o.BodyStructure != nil {
		rw.WriteBodyStructure(fm.bs)
	}
	for i, bs := range o.BodySection {
		// The section pointer itself: go-imap recognises RFC822,
		// RFC822.HEADER and RFC822.TEXT by it and answers under that name.
		if err := writeLiteral(rw.WriteBodySection(bs, int64(len(fm.sections[i]))), fm.sections[i]); err != nil {
			return err
		}
	}
	for i, bs := range o.BinarySection {
		if err := writeLiteral(rw.WriteBinarySection(bs, int64(len(fm.binaries[i]))), fm.binaries[i]); err != nil {
			return err
		}
	}
	for i, bs := range o.BinarySectionSize {
		rw.WriteBinarySectionSize(bs, fm.binSizes[i])
	}
	return nil
}

func writeLiteral(wc interface {
	Write([]byte) (int, error)
	Close() error
}, b []byte) error {
	_, err := wc.Write(b)
	if cerr := wc.Close(); err == nil {
		err = cerr
	}
	return err
}

// sectionPartial applies <offset.size> (RFC 9051 §6.4.5): an offset past the end
// gives the empty string.
func sectionPartial(b []byte, p *imap.SectionPartial) []byte {
	if p == nil {
		return b
	}
	if p.Offset >= int64(len(b)) || p.Offset < 0 {
		return []byte{}
	}
	end := int64(len(b))
	if p.Size >= 0 && p.Offset+p.Size < end {
		end = p.Offset + p.Size
	}
	return b[p.Offset:end]
}

// bodySection extracts BODY[section]<partial> (RFC 3501 §6.4.5) from the
// message tree: every section is a slice of the raw bytes, never
// re-serialised, so BODY[] is exactly the bytes RFC822.SIZE counts,
// BODY[HEADER] + BODY[TEXT] = BODY[], and a part's MIME header and body
// are what the message holds. HEADER, HEADER.FIELDS(.NOT) and TEXT after
// a part number refer to the message a message/rfc822 part encapsulates.
// A part that does not exist is the empty string.
func bodySection(raw []byte, tree func(whole bool) *mimeconv.Part, bs *imap.FetchItemBodySection) []byte {
	if len(bs.Part) == 0 && bs.Specifier == imap.PartSpecifierNone {
		return sectionPartial(raw, bs.Partial) // no parsing needed
	}
	p := tree(len(bs.Part) > 0).Find(bs.Part)
	if p == nil {
		return []byte{}
	}
	e := p // what HEADER and TEXT refer to
	if len(bs.Part) > 0 {
		e = p.Encapsulated()
	}
	var b []byte
	switch bs.Specifier {
	case imap.PartSpecifierNone:
		b = p.Body()
	case imap.PartSpecifierMIME:
		b = p.HeaderBytes()
	case imap.PartSpecifierText:
		b = e.Body()
	case imap.PartSpecifierHeader:
		switch {
		case len(bs.HeaderFields) > 0:
			b = e.FilterHeader(bs.HeaderFields, false)
		case len(bs.HeaderFieldsNot) > 0:
			b = e.FilterHeader(bs.HeaderFieldsNot, true)
		default:
			b = e.HeaderBytes()
		}
	}
	return sectionPartial(b, bs.Partial)
}

// headerFieldsSection writes BODY[HEADER.FIELDS (...)] or
// BODY[HEADER.FIELDS.NOT (...)] from a header list: matching fields in
// their order, names compared without case (RFC 9051 §6.4.5), and the
// empty line that ends a header.
func headerFieldsSection(hs []directapi.MessageHeader, bs *imap.FetchItemBodySection) []byte {
	var b bytes.Buffer
	for _, h := range hs {
		in := len(bs.HeaderFields) > 0 && slices.ContainsFunc(bs.HeaderFields, func(n string) bool { return equalFold(n, h.Name) })
		out := slices.ContainsFunc(bs.HeaderFieldsNot, func(n string) bool { return equalFold(n, h.Name) })
		if (len(bs.HeaderFields) > 0 && !in) || out {
			continue
		}
		b.WriteString(h.Name)
		b.WriteByte(':')
		if h.Value != "" {
			b.WriteByte(' ')
			b.WriteString(h.Value)
		}
		b.WriteString("\r\n")
	}
	b.WriteString("\r\n")
	return b.Bytes()
}

// bodyStructureOf is BODYSTRUCTURE and BODY (RFC 3501 §7.4.2, RFC 9051
// §7.5.2) of a message tree, every field and the extension data: go-imap's
// writer needs the extension data on every node. The tree has applied
// RFC 2045 §5.2's default (text/plain; charset=us-ascii) where the
// Content-Type is missing or unreadable, RFC 2046 §5.1.5's message/rfc822
// inside multipart/digest, and read a multipart whose parts cannot be
// found as the text it is, since a multipart without children cannot be
// written at all.
func bodyStructureOf(p *mimeconv.Part) imap.BodyStructure {
	var disp *imap.BodyStructureDisposition
	if d, params := p.Disposition(); d != "" {
		disp = &imap.BodyStructureDisposition{Value: d, Params: params}
	}
	if p.Children != nil {
		mp := &imap.BodyStructureMultiPart{
			Subtype: p.Subtype,
			Extended: &imap.BodyStructureMultiPartExt{
				Params:      p.Params,
				Disposition: disp,
				Language:    p.Languages(),
				Location:    p.Header.Get("Content-Location"),
			},
		}
		for _, c := range p.Children {
			mp.Children = append(mp.Children, bodyStructureOf(c))
		}
		return mp
	}
	typ, sub, params := p.Type, p.Subtype, p.Params
	if typ == "message" && (sub == "rfc822" || sub == "global") && p.Message == nil {
		// Nested beyond the tree's limits: body-type-msg needs the
		// envelope and structure of the message, which were not read.
		typ, sub, params = "application", "octet-stream", nil
	}
	sp := &imap.BodyStructureSinglePart{
		Type:        typ,
		Subtype:     sub,
		Params:      params,
		ID:          p.Header.Get("Content-Id"),
		Description: p.Header.Get("Content-Description"),
		Encoding:    p.Encoding,
		Size:        uint32(min(len(p.Body()), mailstore.MaxUID)),
		Extended: &imap.BodyStructureSinglePartExt{
			Disposition: disp,
			Language:    p.Languages(),
			Location:    p.Header.Get("Content-Location"),
		},
	}
	lines := int64(p.Lines())
	switch {
	case typ == "message" && p.Message != nil:
		sp.MessageRFC822 = &imap.BodyStructureMessageRFC822{
			Envelope:      envelopeOf(p.Message.Header),
			BodyStructure: bodyStructureOf(p.Message),
			NumLines:      lines,
		}
	case typ == "text":
		sp.Text = &imap.BodyStructureText{NumLines: lines}
	}
	return sp
}

// binarySection is BINARY[part] (RFC 3516 §4.2): the part's body with its
// Content-Transfer-Encoding undone, and nothing else (no charset
// conversion). BINARY[] is the message as it is: a message has no
// transfer encoding of its own. A part that does not exist is the empty
// string; an encoding the tree cannot undo is NO [UNKNOWN-CTE].
func binarySection(raw []byte, tree func(whole bool) *mimeconv.Part, part []int) ([]byte, error) {
	if len(part) == 0 {
		return raw, nil
	}
	p := tree(true).Find(part)
	if p == nil {
		return []byte{}, nil
	}
	b, err := p.Decoded()
	if err != nil {
		return nil, no(imap.ResponseCodeUnknownCTE, "Cannot undo the transfer encoding "+p.Encoding+" of this part")
	}
	return b, nil
}
