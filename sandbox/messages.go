package sandbox

import (
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"mime"
	"slices"
	"strings"
	"time"

	"github.com/directbridge/directbridge/internal/mimeconv"
	"github.com/directbridge/directbridge/internal/sqlstmt"
	"github.com/directbridge/directbridge/upstream/directapi"
)

// storedMsg is one message row with its position in the folder.
type storedMsg struct {
	id         int64
	uid        int64
	msgnum     int
	raw        []byte
	unread     bool
	receivedAt int64
	fromHdr    string
	subject    string
}

// insertMessage appends raw to a folder under the next UID. Headers are
// read once here, so that filters need not parse every message.
func insertMessage(tx *sqlstmt.Tx, folderID int64, raw []byte, unread bool, received time.Time, trashedFrom string) (int64, error) {
	uid, err := allocUIDs(tx, folderID, 1)
	if err != nil {
		return 0, err
	}
	var msgid, from, subject string
	var sent sql.NullInt64
	if p, err := mimeconv.Parse(raw, mimeconv.ParseOptions{SkipBodies: true}); err == nil {
		msgid, subject = p.MessageID, p.Subject
		from = headerValue(p.Headers, "From")
		if !p.SentDate.IsZero() {
			sent = sql.NullInt64{Int64: p.SentDate.UnixMilli(), Valid: true}
		}
	}
	var trashed any
	if trashedFrom != "" {
		trashed = trashedFrom
	}
	_, err = tx.Exec(`INSERT INTO messages (folder_id, uid, raw, size, unread, received_at, sent_at, msgid, from_hdr, subject, trashed_from)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		folderID, uid, raw, len(raw), unread, received.UnixMilli(), sent, msgid, from, subject, trashed)
	if err != nil {
		return 0, fmt.Errorf("sandbox: storing message: %w", err)
	}
	return uid, nil
}

// headerValue returns the first header called name, with RFC 2047 words
// decoded so that sender filters match display names too.
func headerValue(hs []directapi.MessageHeader, name string) string {
	for _, h := range hs {
		if strings.EqualFold(h.Name, name) {
			if d, err := new(mime.WordDecoder).DecodeHeader(h.Value); err == nil {
				return d
			}
			return h.Value
		}
	}
	return ""
}

// msgFilter narrows a folder listing.
type msgFilter struct {
	uids       []int64 // nil: all
	unreadOnly bool
	dated      bool  // from and to apply
	from, to   int64 // received_at range in ms, inclusive
	sender     string
	subject    string
	withRaw    bool // load raw, unread and received_at (what answers are built from)
	numbered   bool // compute msgnum
}

// all reports whether f selects every message of the folder.
func (f msgFilter) all() bool {
	return f.uids == nil && !f.unreadOnly && !f.dated && f.sender == "" && f.subject == ""
}

// loadMessages returns the folder's messages that pass f, in UID order,
// each with its message number (its 1-based position in the folder) when
// f.numbered.
//
// A message's raw bytes come before most of its columns in the row and
// usually spill into overflow pages, which SQLite walks to reach any later
// column. So the work is split: the rows are chosen from indexes alone
// (schema.go), their content is read only for the rows chosen, and
// message numbers are counted over the (folder_id, uid) index. No
// operation reads the raw bytes of a message it does not answer with.
func loadMessages(tx *sqlstmt.Tx, folderID int64, f msgFilter) ([]storedMsg, error) {
	ms, err := selectMessages(tx, folderID, f)
	if err != nil || len(ms) == 0 {
		return ms, err
	}
	if f.withRaw {
		if err := loadContent(tx, folderID, ms); err != nil {
			return nil, err
		}
	}
	if f.numbered {
		if f.all() {
			for i := range ms {
				ms[i].msgnum = i + 1
			}
		} else if err := numberMessages(tx, folderID, ms); err != nil {
			return nil, err
		}
	}
	return ms, nil
}

// selectMessages returns the id and UID of the messages that pass f, in
// UID order. Every query it makes is answered from an index: the UNIQUE
// (folder_id, uid) one, messages_state for the unread state and the
// header filters, messages_received for date ranges.
func selectMessages(tx *sqlstmt.Tx, folderID int64, f msgFilter) ([]storedMsg, error) {
	q, args := selectQuery(folderID, f)
	rows, err := tx.Query(q, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []storedMsg
	for rows.Next() {
		var m storedMsg
		dest := []any{&m.id, &m.uid}
		if f.texts() {
			dest = append(dest, &m.fromHdr, &m.subject)
		}
		if err := rows.Scan(dest...); err != nil {
			return nil, err
		}
		// Text filters run here, not in SQL: SQLite's LIKE folds ASCII only.
		if f.sender != "" && !containsFold(m.fromHdr, f.sender) || f.subject != "" && !containsFold(m.subject, f.subject) {
			continue
		}
		out = append(out, m)
	}
	return out, rows.Err()
}

// texts reports whether f filters on the From header or the subject.
func (f msgFilter) texts() bool { return f.sender != "" || f.subject != "" }

// selectQuery is the query of selectMessages.
func selectQuery(folderID int64, f msgFilter) (string, []any) {
	cols := "id, uid"
	if f.texts() {
		cols += ", from_hdr, subject"
	}
	q := `SELECT ` + cols + ` FROM messages WHERE folder_id = ?`
	args := []any{folderID}
	if f.uids != nil {
		q += ` AND uid IN (SELECT value FROM json_each(?))`
		args = append(args, uidsJSON(f.uids))
	}
	if f.unreadOnly {
		q += ` AND unread = 1`
	}
	if f.dated {
		q += ` AND received_at BETWEEN ? AND ?`
		args = append(args, f.from, f.to)
	}
	return q + ` ORDER BY uid`, args
}

// contentQuery reads what answers are built from, for a list of UIDs.
const contentQuery = `SELECT uid, raw, unread, received_at FROM messages
	WHERE folder_id = ? AND uid IN (SELECT value FROM json_each(?)) ORDER BY uid`

// countQuery numbers a few messages: for each UID of a sorted JSON list,
// how many messages lie after the previous UID of the list and up to it
// (UIDs are positive, so -1 stands before the first). The running sum of
// the counts is the message number. Each count walks its stretch of the
// (folder_id, uid) index once.
const countQuery = `SELECT u, (SELECT COUNT(*) FROM messages WHERE folder_id = ? AND uid > prev AND uid <= u)
	FROM (SELECT value AS u, LAG(value, 1, -1) OVER (ORDER BY value) AS prev FROM json_each(?))
	ORDER BY u`

// walkQuery lists a folder's UIDs up to a limit from the (folder_id, uid) index.
const walkQuery = `SELECT uid FROM messages WHERE folder_id = ? AND uid <= ? ORDER BY uid`

// fewNumbers is the most messages numberMessages counts with countQuery;
// each count is a sub-query of its own, which costs more than reading a
// stretch of index entries, so for more messages it walks the index.
const fewNumbers = 32

// loadContent reads the raw bytes, unread state and arrival time of ms
// (sorted by UID, as selectMessages returns them), looking each message up
// by its UID in the (folder_id, uid) index.
func loadContent(tx *sqlstmt.Tx, folderID int64, ms []storedMsg) error {
	uids := make([]int64, len(ms))
	for i, m := range ms {
		uids[i] = m.uid
	}
	rows, err := tx.Query(contentQuery, folderID, uidsJSON(uids))
	if err != nil {
		return err
	}
	defer rows.Close()
	i := 0
	for rows.Next() {
		var uid int64
		var c storedMsg
		if err := rows.Scan(&uid, &c.raw, &c.unread, &c.receivedAt); err != nil {
			return err
		}
		if i == len(ms) || uid != ms[i].uid {
			return errChanged
		}
		ms[i].raw, ms[i].unread, ms[i].receivedAt = c.raw, c.unread, c.receivedAt
		i++
	}
	if err := rows.Err(); err != nil {
		return err
	}
	if i != len(ms) {
		return errChanged
	}
	return nil
}

// numberMessages sets the message number of ms (sorted by UID, no
// duplicates) from the (folder_id, uid) index alone: the cost grows with
// the position of the last message wanted, counted in index entries, and
// no message is read.
func numberMessages(tx *sqlstmt.Tx, folderID int64, ms []storedMsg) error {
	if len(ms) > fewNumbers {
		return walkNumbers(tx, folderID, ms)
	}
	uids := make([]int64, len(ms))
	for i, m := range ms {
		uids[i] = m.uid
	}
	rows, err := tx.Query(countQuery, folderID, uidsJSON(uids))
	if err != nil {
		return err
	}
	defer rows.Close()
	i, n := 0, 0
	for rows.Next() {
		var uid int64
		var c int
		if err := rows.Scan(&uid, &c); err != nil {
			return err
		}
		if i == len(ms) || uid != ms[i].uid || c == 0 {
			return errChanged
		}
		n += c
		ms[i].msgnum = n
		i++
	}
	if err := rows.Err(); err != nil {
		return err
	}
	if i != len(ms) {
		return errChanged
	}
	return nil
}

// walkNumbers is numberMessages for many messages: one pass over the
// folder's UIDs up to the last one wanted.
func walkNumbers(tx *sqlstmt.Tx, folderID int64, ms []storedMsg) error {
	rows, err := tx.Query(walkQuery, folderID, ms[len(ms)-1].uid)
	if err != nil {
		return err
	}
	defer rows.Close()
	i, n := 0, 0
	for rows.Next() && i < len(ms) {
		var uid int64
		if err := rows.Scan(&uid); err != nil {
			return err
		}
		n++
		if uid == ms[i].uid {
			ms[i].msgnum = n
			i++
		}
	}
	if err := rows.Err(); err != nil {
		return err
	}
	if i != len(ms) {
		return errChanged
	}
	return nil
}

// errChanged reports a second read of a folder that disagrees with the
// first; in one transaction on the one connection it cannot happen.
var errChanged = errors.New("sandbox: folder changed while read")

// uidsJSON encodes UIDs for json_each, SQLite's way of taking a list as
// one parameter.
func uidsJSON(uids []int64) string {
	js, _ := json.Marshal(uids)
	return string(js)
}

func containsFold(s, sub string) bool {
	return strings.Contains(strings.ToLower(s), strings.ToLower(sub))
}

// detail builds the MessageDetail of a stored message. Metadata answers
// (full false) carry every header-derived field but no body or attachments.
func detail(folder string, m storedMsg, full bool) directapi.MessageDetail {
	d := directapi.MessageDetail{
		UID:          m.uid,
		MsgNum:       m.msgnum,
		Folder:       folder,
		Size:         len(m.raw),
		ReceivedDate: directapi.NewDate(time.UnixMilli(m.receivedAt).UTC()),
	}
	p, err := mimeconv.Parse(m.raw, mimeconv.ParseOptions{SkipBodies: !full})
	if err != nil && full {
		// Too complex to take apart: still report what the headers say.
		p, err = mimeconv.Parse(m.raw, mimeconv.ParseOptions{SkipBodies: true})
	}
	if err == nil {
		d.Sender, d.Subject, d.Recipients = p.Sender, p.Subject, p.Recipients
		d.MsgID, d.ReplyTo, d.Headers = p.MessageID, p.ReplyTo, p.Headers
		if !p.SentDate.IsZero() {
			d.SentDate = directapi.NewDate(p.SentDate)
		}
		if full {
			d.Body, d.HTMLBody, d.AttachmentList = p.Body, p.HTMLBody, p.Attachments
		}
	}
	if d.Recipients == nil {
		d.Recipients = []directapi.Recipient{}
	}
	return d
}

// details converts stored messages for an answer.
func details(folder string, ms []storedMsg, full bool) []directapi.MessageDetail {
	out := make([]directapi.MessageDetail, 0, len(ms))
	for _, m := range ms {
		out = append(out, detail(folder, m, full))
	}
	return out
}

// requireUIDs checks that every UID exists in the folder. Operations that
// change messages refuse the whole request otherwise, so nothing is half done.
func requireUIDs(tx *sqlstmt.Tx, folderID int64, uids []int64) error {
	if len(uids) == 0 {
		return errInvalid("uids missing")
	}
	ms, err := loadMessages(tx, folderID, msgFilter{uids: uids})
	if err != nil {
		return err
	}
	if len(ms) == len(dedupe(uids)) {
		return nil
	}
	found := map[int64]bool{}
	for _, m := range ms {
		found[m.uid] = true
	}
	var missing []string
	for _, u := range dedupe(uids) {
		if !found[u] && len(missing) < 10 {
			missing = append(missing, fmt.Sprint(u))
		}
	}
	return errInvalid("no message with uid %s in this folder", strings.Join(missing, ", "))
}

func dedupe(uids []int64) []int64 {
	out := slices.Clone(uids)
	slices.Sort(out)
	return slices.Compact(out)
}

// markMessages sets the unread state.
func markMessages(tx *sqlstmt.Tx, folderID int64, uids []int64, unread bool) error {
	if err := requireUIDs(tx, folderID, uids); err != nil {
		return err
	}
	// Rows already in the wanted state are left alone: an update rewrites
	// the whole row, raw bytes included.
	_, err := tx.Exec(`UPDATE messages SET unread = ? WHERE folder_id = ? AND uid IN (SELECT value FROM json_each(?)) AND unread != ?`,
		unread, folderID, uidsJSON(uids), unread)
	return err
}

// copyMessages copies (or, with move, moves) messages to dest. New UIDs
// are handed out in the order of the source UIDs; the unread state goes along.
func copyMessages(tx *sqlstmt.Tx, srcID, destID int64, uids []int64, move bool, trashedFrom string) error {
	if err := requireUIDs(tx, srcID, uids); err != nil {
		return err
	}
	ms, err := loadMessages(tx, srcID, msgFilter{uids: uids})
	if err != nil {
		return err
	}
	first, err := allocUIDs(tx, destID, len(ms))
	if err != nil {
		return err
	}
	var trashed any
	if trashedFrom != "" {
		trashed = trashedFrom
	}
	for i, m := range ms {
		newUID := first + int64(i)
		if move {
			_, err = tx.Exec(`UPDATE messages SET folder_id = ?, uid = ?, trashed_from = ? WHERE id = ?`, destID, newUID, trashed, m.id)
		} else {
			_, err = tx.Exec(`INSERT INTO messages (folder_id, uid, raw, size, unread, received_at, sent_at, msgid, from_hdr, subject, trashed_from)
				SELECT ?, ?, raw, size, unread, received_at, sent_at, msgid, from_hdr, subject, ? FROM messages WHERE id = ?`, destID, newUID, trashed, m.id)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// removeMessages deletes messages for good.
func removeMessages(tx *sqlstmt.Tx, folderID int64, uids []int64) error {
	if err := requireUIDs(tx, folderID, uids); err != nil {
		return err
	}
	_, err := tx.Exec(`DELETE FROM messages WHERE folder_id = ? AND uid IN (SELECT value FROM json_each(?))`, folderID, uidsJSON(uids))
	return err
}

// deleteMessages implements DeleteMessagesByUIDs. With deleteForever false
// the messages move to INBOX.Trash (created when missing) and remember
// their folder, which GetDeletedMessageCount counts. A message already in
// INBOX.Trash has nowhere further to go, so there both values remove it.
func deleteMessages(tx *sqlstmt.Tx, u user, folder string, uids []int64, forever bool) error {
	src, err := folderID(tx, u, folder)
	if err != nil {
		return err
	}
	if forever || folder == Trash {
		return removeMessages(tx, src, uids)
	}
	if err := requireUIDs(tx, src, uids); err != nil {
		return err
	}
	trash, err := ensureFolder(tx, u, Trash)
	if err != nil {
		return err
	}
	return copyMessages(tx, src, trash, uids, true, folder)
}

// counts returns the number of messages, unread messages, or deleted
// messages of a folder. "Deleted" are messages deleted from the folder
// with deleteForever=false that still wait in INBOX.Trash; for INBOX.Trash
// itself, every message in it.
func countMessages(tx *sqlstmt.Tx, u user, folder, which string) (int, error) {
	id, err := folderID(tx, u, folder)
	if err != nil {
		return 0, err
	}
	var n int
	switch which {
	case "all":
		err = tx.QueryRow(`SELECT COUNT(*) FROM messages WHERE folder_id = ?`, id).Scan(&n)
	case "unread":
		err = tx.QueryRow(`SELECT COUNT(*) FROM messages WHERE folder_id = ? AND unread = 1`, id).Scan(&n)
	case "deleted":
		if folder == Trash {
			err = tx.QueryRow(`SELECT COUNT(*) FROM messages WHERE folder_id = ?`, id).Scan(&n)
			break
		}
		err = tx.QueryRow(`SELECT COUNT(*) FROM messages m JOIN folders f ON f.id = m.folder_id
			WHERE f.user_id = ? AND f.name = ? AND m.trashed_from = ?`, u.id, Trash, folder).Scan(&n)
	}
	return n, err
}

// uidsOf lists a folder's UIDs in ascending order.
func uidsOf(tx *sqlstmt.Tx, folderID int64) ([]int64, error) {
	return column[int64](tx, `SELECT uid FROM messages WHERE folder_id = ? ORDER BY uid`, folderID)
}
