package sandbox

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"testing"
	"time"

	"github.com/directbridge/directbridge/internal/sqlstmt"
)

// referenceLoad is the plain definition of a listing that loadMessages
// must agree with: number every message of the folder, then filter. It
// reads every row of the folder, which is what loadMessages avoids.
func referenceLoad(tx *sqlstmt.Tx, folderID int64, f msgFilter) ([]storedMsg, error) {
	q := `SELECT id, uid, msgnum, raw, unread, received_at, from_hdr, subject FROM (
		SELECT *, ROW_NUMBER() OVER (ORDER BY uid) AS msgnum FROM messages WHERE folder_id = ?) WHERE 1 = 1`
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
		if f.sender != "" && !containsFold(m.fromHdr, f.sender) || f.subject != "" && !containsFold(m.subject, f.subject) {
			continue
		}
		out = append(out, m)
	}
	return out, rows.Err()
}

// TestLoadMessagesMatchesReference runs random listings (UID lists with
// duplicates, gaps and UIDs that never existed, unread, date ranges,
// sender and subject) on a folder with holes and checks that loadMessages
// answers exactly what the plain definition does, message numbers included.
func TestLoadMessagesMatchesReference(t *testing.T) {
	t.Parallel()
	db, err := openDB(filepath.Join(t.TempDir(), "sandbox.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rng := rand.New(rand.NewPCG(8, 1))
	const n = 1000
	base := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	var folder, other int64
	err = (&Server{db: db, stmts: sqlstmt.New(db)}).tx(context.Background(), func(tx *sqlstmt.Tx) error {
		if _, err := tx.Exec(`INSERT INTO users (address, pw_salt, pw_hash, created_at) VALUES ('a@direct.example', x'00', x'00', 0)`); err != nil {
			return err
		}
		for _, name := range []string{"INBOX", "Other"} {
			if err := tx.QueryRow(`INSERT INTO folders (user_id, name) VALUES (1, ?) RETURNING id`, name).Scan(&other); err != nil {
				return err
			}
			if name == "INBOX" {
				folder = other
			}
		}
		for i := range n {
			raw := fmt.Appendf(nil, "From: Sender %d <s%d@other.example>\r\nSubject: Topic %d\r\n\r\nbody %d\r\n", i%7, i%7, i%11, i)
			received := base.Add(time.Duration(rng.IntN(30*24)) * time.Hour)
			if _, err := insertMessage(tx, folder, raw, rng.IntN(3) == 0, received, ""); err != nil {
				return err
			}
			if i%5 == 0 { // another folder's rows interleave with this one's
				if _, err := insertMessage(tx, other, raw, true, received, ""); err != nil {
					return err
				}
			}
		}
		_, err := tx.Exec(`DELETE FROM messages WHERE folder_id = ? AND (uid % 13 = 0 OR uid BETWEEN 500 AND 560)`, folder)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}

	randomUIDs := func() []int64 {
		k := 1 + rng.IntN(3)
		if rng.IntN(3) == 0 {
			k = 33 + rng.IntN(200) // more than fewNumbers
		}
		out := make([]int64, k)
		for i := range out {
			out[i] = 1 + rng.Int64N(n+20) // some beyond the last UID
		}
		if k > 1 {
			out = append(out, out[0]) // a duplicate
		}
		return out
	}
	tx, err := sqlstmt.New(db).Begin(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	for i := range 150 {
		var f msgFilter
		switch i % 6 {
		case 0:
			f.uids = randomUIDs()
		case 1:
			f.unreadOnly = true
		case 2:
			f.dated, f.from = true, base.Add(time.Duration(rng.IntN(30*24))*time.Hour).UnixMilli()
			f.to = f.from + rng.Int64N(5*24*3600*1000)
		case 3:
			f.sender = fmt.Sprintf("SENDER %d", rng.IntN(8))
		case 4:
			f.subject = fmt.Sprintf("topic %d", rng.IntN(12))
		case 5:
			f.uids, f.unreadOnly = randomUIDs(), true
		}
		if i == 0 {
			f = msgFilter{}
		}
		want, err := referenceLoad(tx, folder, f)
		if err != nil {
			t.Fatal(err)
		}
		f.withRaw, f.numbered = true, true
		got, err := loadMessages(tx, folder, f)
		if err != nil {
			t.Fatalf("filter %+v: %v", f, err)
		}
		if len(got) != len(want) {
			t.Fatalf("filter %+v: %d messages, want %d", f, len(got), len(want))
		}
		for j := range got {
			g, w := got[j], want[j]
			if g.id != w.id || g.uid != w.uid || g.msgnum != w.msgnum || !bytes.Equal(g.raw, w.raw) || g.unread != w.unread || g.receivedAt != w.receivedAt {
				t.Fatalf("filter %+v: message %d is uid %d msgnum %d unread %v received %d, want uid %d msgnum %d unread %v received %d",
					f, j, g.uid, g.msgnum, g.unread, g.receivedAt, w.uid, w.msgnum, w.unread, w.receivedAt)
			}
		}
	}
}
