package imapbackend

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"mime"
	"slices"
	"strings"
	"time"

	"github.com/emersion/go-imap/v2"
	"github.com/emersion/go-imap/v2/imapserver"
	_ "github.com/emersion/go-message/charset" // every charset in ENVELOPE, SEARCH and BODYSTRUCTURE decoding
	"github.com/emersion/go-message/textproto"

	"github.com/directbridge/directbridge/directapi"
	"github.com/directbridge/directbridge/mailstore"
	"github.com/directbridge/directbridge/mimeconv"
)

// codeExpungeIssued is RFC 9051 §7.1's EXPUNGEISSUED, which go-imap does
// not name: the command named a message that was expunged meanwhile.
const codeExpungeIssued imap.ResponseCode = "EXPUNGEISSUED"

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
		if err := s.fetchRaws(ctx, chunk); err != nil {
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
		if needs.markSeen && !s.readOnly {
			if err := s.fetchMarkSeen(ctx, chunk); err != nil {
				return imapError(err)
			}
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
	if anyGone {
		// Let the EXPUNGE reach the client soon rather than at the next
		// poll; a failure leaves it to the poller. (Messages the mirror
		// knows are expunged have their EXPUNGE queued already.)
		if refresh {
			if err := s.sel.sync(ctx); err != nil {
				s.srv.cfg.Logger.Warn("imap refresh after expunged message failed", "err", err)
			}
		}
		return no(codeExpungeIssued, "Some of the requested messages were deleted at the provider")
	}
	return nil
}

// fetchMeta loads metadata where the command needs it and takes a
// snapshot of it, then decides which messages need their raw bytes.
// RFC822.SIZE prefers the exact length of bytes already in hand or in the
// cache, so sizes agree with BODY[]; metadata's size is used otherwise.
func (s *session) fetchMeta(ctx context.Context, msgs []*fetchMsg, o *imap.FetchOptions, needs fetchNeeds) error {
	m := s.sel
	m.mu.Lock()
	ref := m.ref()
	m.mu.Unlock()
	var want []*message
	for _, fm := range msgs {
		if !fm.live {
			// Expunged: the provider has nothing more to give.
			if needs.raw || o.RFC822Size || needs.headers {
				if raw, ok := s.srv.bodies.Cached(ref, fm.msg.uid); ok {
					fm.raw = raw
				}
			}
			continue
		}
		if o.RFC822Size && !needs.raw {
			if raw, ok := s.srv.bodies.Cached(ref, fm.msg.uid); ok {
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
	m.mu.Lock()
	for _, fm := range msgs {
		fm.meta = fm.msg.meta
	}
	m.mu.Unlock()
	for _, fm := range msgs {
		known := metaKnown(fm.meta)
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
	var want []*message
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
			if raw, ok := got[fm.msg.uid]; ok {
				fm.raw = raw
			} else {
				fm.gone = true
			}
		}
	}
	return nil
}

// fetchMarkSeen sets \Seen on the unread messages of a batch that the
// command reads, at the provider first (one MarkMessagesAsReadByUIDs call)
// and then in the mirror, and tells the other connections on the folder
// with FETCH FLAGS. This connection gets FLAGS in its FETCH answer, as RFC
// 9051 §6.4.5 asks when \Seen is set implicitly, so its own view is
// left out.
//
// The change raises the mirror's version (the rule of store.go), so that
// a refresh which read the unread list before the call cannot undo \Seen
// afterwards.
func (s *session) fetchMarkSeen(ctx context.Context, chunk []*fetchMsg) error {
	m := s.sel
	var uids []int64
	for _, fm := range chunk {
		if !fm.gone && fm.live && !hasSeen(s.flagsOf(fm.msg.uid)) {
			uids = append(uids, int64(fm.msg.uid))
		}
	}
	if len(uids) == 0 {
		return nil
	}
	if err := s.srv.cfg.Provider.SetRead(ctx, s.auth, m.name, uids, true); err != nil {
		return err
	}
	marked := make(map[imap.UID]bool, len(uids))
	ups := make([]flagUpdate, 0, len(uids))
	read := true
	for _, u := range uids {
		marked[imap.UID(u)] = true
		ups = append(ups, flagUpdate{uid: imap.UID(u), seen: &read})
	}
	for _, fm := range chunk {
		if !fm.gone && marked[fm.msg.uid] {
			fm.nowSeen = true
		}
	}
	// This connection's FETCH answer carries the new FLAGS; the others
	// get FETCH FLAGS.
	m.showFlags(ups, s.view)
	return nil
}

func compareUID(a, b imap.UID) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
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
			uids = append(uids, fm.msg.uid)
			want = append(want, fm)
		}
	}
	for i, fl := range s.view.FetchFlags(uids...) {
		want[i].flags = fl
	}
}

// metaKnown reports metadata the provider gave. ensureMeta leaves a
// placeholder (UID and size -1, nothing else) for a message the provider
// did not list, that is, one deleted there since the last refresh.
func metaKnown(d *directapi.MessageDetail) bool {
	if d == nil {
		return false
	}
	return !(d.Size < 0 && d.ReceivedDate.IsZero() && d.SentDate.IsZero() && len(d.Headers) == 0 &&
		d.Subject == "" && d.Sender == "" && d.MsgNum == 0 && d.MsgID == "")
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
// the same list read from the raw bytes with the provider's own parser
// when the metadata has none.
func topHeaders(meta *directapi.MessageDetail, raw []byte) ([]directapi.MessageHeader, bool) {
	if metaKnown(meta) && len(meta.Headers) > 0 {
		return meta.Headers, true
	}
	if raw == nil {
		return nil, false
	}
	p, err := mimeconv.Parse(raw, mimeconv.ParseOptions{SkipBodies: true})
	if err != nil {
		return nil, true // no header at all
	}
	return p.Headers, true
}

// renderFetch computes every requested item of one message. It fails only
// for BINARY of a part whose transfer encoding is unknown, which RFC 3516
// §4.2 requires to fail with NO [UNKNOWN-CTE].
func renderFetch(fm *fetchMsg, o *imap.FetchOptions) (err error) {
	defer func() {
		// Malformed mail must never take the connection down (go-imap
		// closes it on a panic).
		if v := recover(); v != nil {
			err = no(imap.ResponseCodeParse, fmt.Sprintf("Message UID %d cannot be taken apart", fm.msg.uid))
		}
	}()
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
		fm.env = envelopeOf(lookupList(hdrs()))
	}
	if o.BodyStructure != nil {
		fm.bs = bodyStructureOf(fm.raw)
	}
	fm.sections = make([][]byte, len(o.BodySection))
	for i, bs := range o.BodySection {
		if isTopHeaderFields(bs) {
			fm.sections[i] = sectionPartial(headerFieldsSection(hdrs(), bs), bs.Partial)
		} else {
			fm.sections[i] = bodySection(fm.raw, bs)
		}
	}
	fm.binaries = make([][]byte, len(o.BinarySection))
	for i, bs := range o.BinarySection {
		b, err := binarySection(fm.raw, bs.Part)
		if err != nil {
			return err
		}
		fm.binaries[i] = sectionPartial(b, bs.Partial)
	}
	fm.binSizes = make([]uint32, len(o.BinarySectionSize))
	for i, bs := range o.BinarySectionSize {
		b, err := binarySection(fm.raw, bs.Part)
		if err != nil {
			return err
		}
		fm.binSizes[i] = uint32(min(len(b), maxUID))
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
		rw.WriteUID(fm.msg.uid)
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

// bodyOffset is the offset of the body: just after the first empty line
// (CRLF or bare LF), or the end when the message is all header.
func bodyOffset(raw []byte) int {
	for i := 0; i < len(raw); {
		j := bytes.IndexByte(raw[i:], '\n')
		if j < 0 {
			return len(raw)
		}
		line := raw[i : i+j+1]
		if len(line) == 1 || (len(line) == 2 && line[0] == '\r') {
			return i + j + 1
		}
		i += j + 1
	}
	return len(raw)
}

// bodySection extracts BODY[section]<partial>. The message itself, its
// HEADER and its TEXT are cut from the raw bytes, so BODY[] is exactly
// the bytes RFC822.SIZE counts and BODY[HEADER] + BODY[TEXT] = BODY[];
// parts go through go-imap's extractor.
func bodySection(raw []byte, bs *imap.FetchItemBodySection) []byte {
	if len(bs.Part) == 0 {
		switch bs.Specifier {
		case imap.PartSpecifierNone:
			return sectionPartial(raw, bs.Partial)
		case imap.PartSpecifierHeader:
			return sectionPartial(raw[:bodyOffset(raw)], bs.Partial)
		case imap.PartSpecifierText:
			return sectionPartial(raw[bodyOffset(raw):], bs.Partial)
		}
	}
	b := imapserver.ExtractBodySection(bytes.NewReader(raw), bs)
	if b == nil {
		// A part that does not exist is the empty string.
		return []byte{}
	}
	return b
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

// Limits of bodyStructureOf against hostile nesting.
const (
	maxMIMEDepth = 20
	maxMIMEParts = 1000
)

// bodyStructureOf is BODYSTRUCTURE (RFC 9051 §7.5.2), in the shape of
// go-imap's ExtractBodyStructure but safe to write back for any input:
// every node carries its extension data (go-imap's writer needs it), a
// missing Content-Type is RFC 2045 §5.2's text/plain; charset=us-ascii
// (message/rfc822 inside multipart/digest, RFC 2046 §5.1.5), and a
// multipart whose parts cannot be found is shown as the text it is, since
// a multipart without children cannot be written at all.
func bodyStructureOf(raw []byte) imap.BodyStructure {
	n := 0
	h, body := splitEntity(raw)
	return mimeStructure(h, body, "", 0, &n)
}

// splitEntity parses the header of an entity (what can be read of it) and
// returns it with the body.
func splitEntity(b []byte) (textproto.Header, []byte) {
	end := bodyOffset(b)
	h, _ := textproto.ReadHeader(bufio.NewReader(bytes.NewReader(b[:end])))
	return h, b[end:]
}

func mimeStructure(h textproto.Header, body []byte, parentType string, depth int, n *int) imap.BodyStructure {
	*n++
	mediaType, params, explicit := mediaTypeOf(h)
	if !explicit && parentType == "multipart/digest" {
		mediaType, params = "message/rfc822", nil
	}
	typ, sub, _ := strings.Cut(mediaType, "/")
	if typ == "multipart" && depth < maxMIMEDepth {
		mp := &imap.BodyStructureMultiPart{Subtype: sub}
		mr := textproto.NewMultipartReader(bytes.NewReader(body), params["boundary"])
		for *n < maxMIMEParts {
			p, err := mr.NextPart()
			if err != nil {
				break
			}
			b, err := io.ReadAll(p)
			if err != nil {
				break
			}
			mp.Children = append(mp.Children, mimeStructure(p.Header, b, mediaType, depth+1, n))
		}
		if len(mp.Children) > 0 {
			mp.Extended = &imap.BodyStructureMultiPartExt{
				Params:      params,
				Disposition: dispositionOf(h),
				Language:    languagesOf(h),
				Location:    h.Get("Content-Location"),
			}
			return mp
		}
		typ, sub, params = "text", "plain", map[string]string{"charset": "us-ascii"}
	}
	isMsg := typ == "message" && (sub == "rfc822" || sub == "global")
	if isMsg && depth >= maxMIMEDepth {
		typ, sub, isMsg = "application", "octet-stream", false
	}
	sp := &imap.BodyStructureSinglePart{
		Type:        typ,
		Subtype:     sub,
		Params:      params,
		ID:          h.Get("Content-Id"),
		Description: h.Get("Content-Description"),
		Encoding:    h.Get("Content-Transfer-Encoding"),
		Size:        uint32(min(len(body), maxUID)),
		Extended: &imap.BodyStructureSinglePartExt{
			Disposition: dispositionOf(h),
			Language:    languagesOf(h),
			Location:    h.Get("Content-Location"),
		},
	}
	lines := int64(bytes.Count(body, []byte("\n")))
	switch {
	case isMsg:
		nh, nbody := splitEntity(body)
		sp.MessageRFC822 = &imap.BodyStructureMessageRFC822{
			Envelope:      envelopeOf(lookupTextproto(nh)),
			BodyStructure: mimeStructure(nh, nbody, "", depth+1, n),
			NumLines:      lines,
		}
	case typ == "text":
		sp.Text = &imap.BodyStructureText{NumLines: lines}
	}
	return sp
}

// mediaTypeOf reads Content-Type; explicit is false when it is missing or
// unreadable, which RFC 2045 §5.2 makes text/plain; charset=us-ascii.
// Parameters that cannot be read are dropped, the type kept.
func mediaTypeOf(h textproto.Header) (mediaType string, params map[string]string, explicit bool) {
	t, params, ok := parseMIMEParams(h.Get("Content-Type"))
	if !ok || !isMIMEType(t) {
		return "text/plain", map[string]string{"charset": "us-ascii"}, false
	}
	return t, params, true
}

// parseMIMEParams reads a value with parameters (Content-Type,
// Content-Disposition), decoding the RFC 2047 words some mailers put in
// parameter values.
func parseMIMEParams(v string) (string, map[string]string, bool) {
	if strings.TrimSpace(v) == "" {
		return "", nil, false
	}
	t, params, err := mime.ParseMediaType(v)
	switch {
	case err == mime.ErrInvalidMediaParameter:
		params = nil
	case err != nil:
		return "", nil, false
	}
	for k, p := range params {
		params[k] = decodeHeaderWords(p)
	}
	return t, params, true
}

func isMIMEType(t string) bool {
	typ, sub, ok := strings.Cut(t, "/")
	return ok && typ != "" && sub != "" && !strings.ContainsAny(t, " \t;\"")
}

func dispositionOf(h textproto.Header) *imap.BodyStructureDisposition {
	disp, params, ok := parseMIMEParams(h.Get("Content-Disposition"))
	if !ok || !isMIMEToken(disp) {
		return nil
	}
	return &imap.BodyStructureDisposition{Value: disp, Params: params}
}

func isMIMEToken(s string) bool {
	return !strings.ContainsAny(s, " \t;\"()<>@,:\\/[]?=")
}

func languagesOf(h textproto.Header) []string {
	v := h.Get("Content-Language")
	if v == "" {
		return nil
	}
	var out []string
	for _, l := range strings.Split(v, ",") {
		if l = strings.TrimSpace(l); l != "" {
			out = append(out, l)
		}
	}
	return out
}

// binarySection is BINARY[part] (RFC 3516 §4.2): the part's body with its
// Content-Transfer-Encoding undone, and nothing else (no charset
// conversion). BINARY[] is the message as it is: a message has no
// transfer encoding of its own. An encoding the server cannot undo is NO
// [UNKNOWN-CTE].
func binarySection(raw []byte, part []int) ([]byte, error) {
	if len(part) == 0 {
		return raw, nil
	}
	hdr := imapserver.ExtractBodySection(bytes.NewReader(raw), &imap.FetchItemBodySection{Part: part, Specifier: imap.PartSpecifierMIME})
	if hdr == nil {
		return []byte{}, nil // no such part
	}
	body := imapserver.ExtractBodySection(bytes.NewReader(raw), &imap.FetchItemBodySection{Part: part})
	h, _ := splitEntity(hdr)
	if t, _, _ := mediaTypeOf(h); strings.HasPrefix(t, "multipart/") {
		return body, nil // RFC 2045 §6.4: multiparts are never encoded
	}
	switch cte := strings.ToLower(strings.TrimSpace(h.Get("Content-Transfer-Encoding"))); cte {
	case "", "7bit", "8bit", "binary":
		return body, nil
	case "base64":
		return decodeBase64(body), nil
	case "quoted-printable":
		return decodeQuotedPrintable(body), nil
	default:
		return nil, no(imap.ResponseCodeUnknownCTE, "Cannot undo the transfer encoding "+cte+" of this part")
	}
}

// decodeBase64 decodes as RFC 2045 §6.8 says: characters outside the
// base64 alphabet are ignored, as is what follows the padding.
func decodeBase64(b []byte) []byte {
	clean := make([]byte, 0, len(b))
	for _, c := range b {
		switch {
		case c == '=':
			goto done
		case 'A' <= c && c <= 'Z', 'a' <= c && c <= 'z', '0' <= c && c <= '9', c == '+', c == '/':
			clean = append(clean, c)
		}
	}
done:
	if len(clean)%4 == 1 {
		clean = clean[:len(clean)-1] // a lone sextet carries no whole byte
	}
	out := make([]byte, base64.RawStdEncoding.DecodedLen(len(clean)))
	n, _ := base64.RawStdEncoding.Decode(out, clean)
	return out[:n]
}

// decodeQuotedPrintable decodes as RFC 2045 §6.7 says, leniently: trailing
// white space goes, "=" at the end of a line joins it to the next, "=XX"
// is a byte and any other "=" is kept as it is. Line ends stay as written.
func decodeQuotedPrintable(b []byte) []byte {
	out := make([]byte, 0, len(b))
	for len(b) > 0 {
		line, eol := b, []byte(nil)
		if i := bytes.IndexByte(b, '\n'); i >= 0 {
			line, b = b[:i], b[i+1:]
			eol = []byte("\n")
			if len(line) > 0 && line[len(line)-1] == '\r' {
				line, eol = line[:len(line)-1], []byte("\r\n")
			}
		} else {
			b = nil
		}
		line = bytes.TrimRight(line, " \t")
		if len(line) > 0 && line[len(line)-1] == '=' {
			line, eol = line[:len(line)-1], nil // soft line break
		}
		for i := 0; i < len(line); i++ {
			if line[i] == '=' && i+2 < len(line) && qpIsHex(line[i+1]) && qpIsHex(line[i+2]) {
				out = append(out, qpUnhex(line[i+1])<<4|qpUnhex(line[i+2]))
				i += 2
				continue
			}
			out = append(out, line[i])
		}
		out = append(out, eol...)
	}
	return out
}

func qpIsHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

func qpUnhex(c byte) byte {
	switch {
	case c <= '9':
		return c - '0'
	case c <= 'F':
		return c - 'A' + 10
	}
	return c - 'a' + 10
}
