package sandbox

// The sandbox cannot count the rows and pages SQLite reads, but it can ask
// SQLite how it will run a query. These tests hold the message queries to
// the plan loadMessages relies on: rows are chosen from indexes alone, and
// only the chosen rows are read.

import (
	"path/filepath"
	"strings"
	"testing"
)

// queryPlan returns the lines of EXPLAIN QUERY PLAN for q.
func queryPlan(t *testing.T, q string, args ...any) []string {
	t.Helper()
	db, err := openDB(filepath.Join(t.TempDir(), "sandbox.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rows, err := db.Query("EXPLAIN QUERY PLAN "+q, args...)
	if err != nil {
		t.Fatalf("EXPLAIN %s: %v", q, err)
	}
	defer rows.Close()
	var lines []string
	for rows.Next() {
		var id, parent, unused int
		var detail string
		if err := rows.Scan(&id, &parent, &unused, &detail); err != nil {
			t.Fatal(err)
		}
		lines = append(lines, detail)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return lines
}

// messageAccess returns the plan lines that access the messages table.
func messageAccess(plan []string) []string {
	var out []string
	for _, l := range plan {
		if strings.Contains(l, " messages ") || strings.HasSuffix(l, " messages") {
			out = append(out, l)
		}
	}
	return out
}

// TestSelectionReadsIndexesOnly: every way a listing chooses its rows is
// answered from a covering index, so no message row (and no raw blob) is
// read to decide what an answer holds.
func TestSelectionReadsIndexesOnly(t *testing.T) {
	cases := []struct {
		name  string
		f     msgFilter
		index string
	}{
		{"all", msgFilter{}, ""},
		{"uids", msgFilter{uids: []int64{1, 5, 5, 9}}, "(folder_id=? AND uid=?)"},
		{"unread", msgFilter{unreadOnly: true}, "messages_state"},
		{"dated", msgFilter{dated: true, from: 1, to: 2}, "messages_received (folder_id=? AND received_at>? AND received_at<?)"},
		{"sender", msgFilter{sender: "carol"}, "messages_state"},
		{"subject", msgFilter{subject: "lab"}, "messages_state"},
	}
	for _, c := range cases {
		q, args := selectQuery(1, c.f)
		plan := queryPlan(t, q, args...)
		acc := messageAccess(plan)
		if len(acc) != 1 || !strings.HasPrefix(acc[0], "SEARCH messages USING COVERING INDEX ") || !strings.Contains(acc[0], c.index) {
			t.Errorf("%s: plan %q, want one SEARCH of messages using a covering index %s", c.name, plan, c.index)
		}
	}
}

// TestNumberingReadsIndexOnly: message numbers come from the (folder_id,
// uid) index.
func TestNumberingReadsIndexOnly(t *testing.T) {
	for name, plan := range map[string][]string{
		"count": queryPlan(t, countQuery, 1, "[3,7]"),
		"walk":  queryPlan(t, walkQuery, 1, 7),
	} {
		acc := messageAccess(plan)
		if len(acc) != 1 || !strings.HasPrefix(acc[0], "SEARCH messages USING COVERING INDEX sqlite_autoindex_messages_1 (folder_id=? AND uid") {
			t.Errorf("%s: plan %q, want one SEARCH of the (folder_id, uid) index", name, plan)
		}
	}
}

// TestContentReadsChosenRowsOnly: the raw bytes are read by looking up
// each chosen UID, never by scanning the folder.
func TestContentReadsChosenRowsOnly(t *testing.T) {
	plan := queryPlan(t, contentQuery, 1, "[3,7]")
	acc := messageAccess(plan)
	if len(acc) != 1 || acc[0] != "SEARCH messages USING INDEX sqlite_autoindex_messages_1 (folder_id=? AND uid=?)" {
		t.Errorf("plan %q, want one look-up per UID in the (folder_id, uid) index", plan)
	}
}
