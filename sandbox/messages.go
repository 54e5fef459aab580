package sandbox

import (
	"database/sql"
	"encoding/json"
	"fmt"
	"mime"
	"slices"
	"strings"
	"time"

	"github.com/directbridge/directbridge/directapi"
	"github.com/directbridge/directbridge/mimeconv"
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
func insertMessage(tx *sql.Tx, folderID int64, raw []byte, unread bool, received time.Time, trashedFrom string) (int64, error) {
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
	withRaw    bool
}

// loadMessages returns the folder's messages that pass f, in UID order,
// each with its message number (its 1-based position in the folder).
func loadMessages(tx *sql.Tx, folderID int64, f msgFilter) ([]storedMsg, error) {
	rawCol := "NULL"
	if f.withRaw {
		rawCol = "raw"
	}
	q := `SELECT id, uid, msgnum, ` + rawCol + `, unread, received_at, from_hdr, subject FROM (
		SELECT *, ROW_NUMBER() OVER (ORDER BY uid) AS msgnum FROM messages WHERE folder_id = ?) WHERE 1 = 1`
	args := []any{folderID}
	if f.uids != nil {
		js, _ := json.Marshal(f.uids)
		q += ` AND uid IN (SELECT value FROM json_each(?))`
		args = append(args, string(js))
	}
	if f.unreadOnly {
		q += ` AND unread = 1`
	}
	if f.dated {
		q += ` AND received_at BETWEEN ? AND ?`
		args = append(args, f.from, f.to)
	}
	rows, err := tx.Query(q+` ORDER BY uid`, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []storedMsg
	for rows.Next() {
		var m storedMsg
		if err := rows.Scan(&m.id, &m.uid, &m.msgnum, &m.raw, &m.unread, &m.receivedAt, &m.fromHdr, &m.subject); err != nil {
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
func requireUIDs(tx *sql.Tx, folderID int64, uids []int64) error {
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
func markMessages(tx *sql.Tx, folderID int64, uids []int64, unread bool) error {
	if err := requireUIDs(tx, folderID, uids); err != nil {
		return err
	}
	js, _ := json.Marshal(uids)
	_, err := tx.Exec(`UPDATE messages SET unread = ? WHERE folder_id = ? AND uid IN (SELECT value FROM json_each(?))`, unread, folderID, string(js))
	return err
}

// copyMessages copies (or, with move, moves) messages to dest. New UIDs
// are handed out in the order of the source UIDs; the unread state goes along.
func copyMessages(tx *sql.Tx, srcID, destID int64, uids []int64, move bool, trashedFrom string) error {
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
func removeMessages(tx *sql.Tx, folderID int64, uids []int64) error {
	if err := requireUIDs(tx, folderID, uids); err != nil {
		return err
	}
	js, _ := json.Marshal(uids)
	_, err := tx.Exec(`DELETE FROM messages WHERE folder_id = ? AND uid IN (SELECT value FROM json_each(?))`, folderID, string(js))
	return err
}

// deleteMessages implements DeleteMessagesByUIDs. With deleteForever false
// the messages move to INBOX.Trash (created when missing) and remember
// their folder, which GetDeletedMessageCount counts. A message already in
// INBOX.Trash has nowhere further to go, so there both values remove it.
func deleteMessages(tx *sql.Tx, u user, folder string, uids []int64, forever bool) error {
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
func countMessages(tx *sql.Tx, u user, folder, which string) (int, error) {
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
func uidsOf(tx *sql.Tx, folderID int64) ([]int64, error) {
	return column[int64](tx, `SELECT uid FROM messages WHERE folder_id = ? ORDER BY uid`, folderID)
}
