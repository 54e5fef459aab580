package bridge_test

import (
	"crypto/tls"
	"os"
	"path/filepath"
	"testing"

	"github.com/emersion/go-imap/v2/imapclient"

	"github.com/directbridge/directbridge/bridge"
	"github.com/directbridge/directbridge/internal/pgtest"
)

// TestMain stops the throwaway PostgreSQL of the package's tests.
func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

// TestStateInPostgres: with DIRECTBRIDGE_STATE_URL the state store is in
// PostgreSQL, not in the data directory: a mailbox's UIDVALIDITY and
// UIDNEXT survive a restart of the bridge through it, and no state.db is
// written.
func TestStateInPostgres(t *testing.T) {
	url := pgtest.Database(t)
	cfg := testConfig(t)
	cfg.StateURL = url
	selectInbox := func() (uint32, uint32) {
		t.Helper()
		b, err := bridge.New(cfg, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		stop := startBridge(t, b)
		defer stop()
		c, err := imapclient.DialStartTLS(b.Addr("IMAP (STARTTLS)"), &imapclient.Options{TLSConfig: &tls.Config{InsecureSkipVerify: true}})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if err := c.Login("alice@direct.example", "sandbox-demo").Wait(); err != nil {
			t.Fatal(err)
		}
		data, err := c.Select("INBOX", nil).Wait()
		if err != nil {
			t.Fatal(err)
		}
		c.Logout().Wait()
		return data.UIDValidity, uint32(data.UIDNext)
	}
	v1, n1 := selectInbox()
	v2, n2 := selectInbox()
	if v1 == 0 || v1 != v2 || n1 != n2 {
		t.Fatalf("INBOX before the restart: UIDVALIDITY %d UIDNEXT %d; after: %d %d", v1, n1, v2, n2)
	}
	if _, err := os.Stat(filepath.Join(cfg.DataDir, "state.db")); !os.IsNotExist(err) {
		t.Fatalf("state.db in the data directory with the state in PostgreSQL: %v", err)
	}
}
