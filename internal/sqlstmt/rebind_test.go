package sqlstmt

import "testing"

// TestRebind: ? placeholders become $1, $2, ... in order; those inside
// quoted strings and identifiers stay.
func TestRebind(t *testing.T) {
	for in, want := range map[string]string{
		`SELECT a FROM t WHERE b = ? AND c IN (?, ?)`: `SELECT a FROM t WHERE b = $1 AND c IN ($2, $3)`,
		`SELECT '?' || "x?y" FROM t WHERE d = ?`:      `SELECT '?' || "x?y" FROM t WHERE d = $1`,
		`SELECT 'it''s ?' FROM t WHERE e = ?`:         `SELECT 'it''s ?' FROM t WHERE e = $1`,
		`SELECT 1`:                                    `SELECT 1`,
	} {
		if got := rebind(in); got != want {
			t.Errorf("rebind(%q) = %q, want %q", in, got, want)
		}
	}
}
