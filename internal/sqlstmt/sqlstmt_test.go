package sqlstmt

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	_ "modernc.org/sqlite"
)

func openOne(t *testing.T) *sql.DB {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+filepath.Join(t.TempDir(), "t.db"))
	if err != nil {
		t.Fatal(err)
	}
	db.SetMaxOpenConns(1) // as the state store and the sandbox
	t.Cleanup(func() { db.Close() })
	if _, err := db.Exec(`CREATE TABLE kv (k TEXT PRIMARY KEY, v INTEGER)`); err != nil {
		t.Fatal(err)
	}
	return db
}

func (c *Cache) prepared(q string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.stmts[q] != nil
}

// TestPreparedAfterFirstUse: a statement run in a transaction is prepared
// once the transaction ends, and later transactions and plain calls use
// it, on a database with a single connection (no deadlock).
func TestPreparedAfterFirstUse(t *testing.T) {
	db := openOne(t)
	c := New(db)
	defer c.Close()
	ctx := context.Background()
	const ins = `INSERT INTO kv (k, v) VALUES (?, ?) ON CONFLICT (k) DO UPDATE SET v = v + excluded.v`
	const get = `SELECT v FROM kv WHERE k = ?`
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; i < 3; i++ {
			tx, err := c.Begin(ctx, nil)
			if err != nil {
				t.Error(err)
				return
			}
			if _, err := tx.Exec(ins, "a", 1); err != nil {
				t.Error(err)
			}
			var v int
			if err := tx.QueryRow(get, "a").Scan(&v); err != nil || v != i+1 {
				t.Errorf("round %d: v = %d, %v", i, v, err)
			}
			if err := tx.Commit(); err != nil {
				t.Error(err)
			}
			if !c.prepared(ins) || !c.prepared(get) {
				t.Errorf("round %d: statements not prepared after the transaction", i)
			}
		}
		if _, err := c.Exec(ctx, ins, "a", 10); err != nil {
			t.Error(err)
		}
		var v int
		if err := c.QueryRow(ctx, get, "a").Scan(&v); err != nil || v != 13 {
			t.Errorf("outside a transaction: v = %d, %v", v, err)
		}
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("deadlock: preparing waited for the only connection")
	}
}

// TestConcurrentTransactions: transactions from many goroutines share the
// prepared statements and see each other's committed writes.
func TestConcurrentTransactions(t *testing.T) {
	db := openOne(t)
	c := New(db)
	defer c.Close()
	ctx := context.Background()
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 50; i++ {
				tx, err := c.Begin(ctx, nil)
				if err != nil {
					t.Error(err)
					return
				}
				if _, err := tx.Exec(`INSERT INTO kv (k, v) VALUES (?, 1) ON CONFLICT (k) DO UPDATE SET v = v + 1`, "n"); err != nil {
					t.Error(err)
				}
				if i%2 == 0 {
					tx.Commit()
				} else {
					tx.Rollback()
				}
			}
		}()
	}
	wg.Wait()
	var v int
	if err := c.QueryRow(ctx, `SELECT v FROM kv WHERE k = ?`, "n").Scan(&v); err != nil || v != 200 {
		t.Fatalf("v = %d, %v; want 200 committed increments", v, err)
	}
}

// TestBounded: texts past MaxStatements run unprepared and are not kept.
func TestBounded(t *testing.T) {
	db := openOne(t)
	c := New(db)
	defer c.Close()
	ctx := context.Background()
	for i := 0; i < MaxStatements+20; i++ {
		if _, err := c.Exec(ctx, fmt.Sprintf(`INSERT INTO kv (k, v) VALUES ('k%d', %d)`, i, i)); err != nil {
			t.Fatal(err)
		}
	}
	c.mu.Lock()
	n := len(c.stmts)
	c.mu.Unlock()
	if n > MaxStatements {
		t.Fatalf("%d statements kept; at most %d", n, MaxStatements)
	}
	var count int
	if err := c.QueryRow(ctx, `SELECT COUNT(*) FROM kv`).Scan(&count); err != nil || count != MaxStatements+20 {
		t.Fatalf("count %d, %v", count, err)
	}
}
