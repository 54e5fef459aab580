package bridge

import (
	"context"
	"io"
	"log/slog"
	"testing"

	"github.com/directbridge/directbridge/imapbackend"
	"github.com/directbridge/directbridge/internal/state"
)

// TestIMAPLayoutDefault: a new data directory gets the flat layout, one
// IMAP clients used before layouts existed keeps inbox, a recorded
// layout is kept while the variable is unset, and the variable wins.
func TestIMAPLayoutDefault(t *testing.T) {
	ctx := context.Background()
	layoutOf := func(dir, env string) imapbackend.Layout {
		t.Helper()
		st, err := state.OpenStore(dir)
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		b := &Bridge{store: st, cfg: Config{IMAPLayout: env}, log: slog.New(slog.NewTextHandler(io.Discard, nil))}
		l, err := b.imapLayout(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	fresh := t.TempDir()
	if l := layoutOf(fresh, ""); l != imapbackend.LayoutFlat {
		t.Fatalf("new data directory: %s; want flat", l)
	}
	if l := layoutOf(fresh, "inbox"); l != imapbackend.LayoutInbox {
		t.Fatalf("variable set: %s; want inbox", l)
	}
	if l := layoutOf(fresh, ""); l != imapbackend.LayoutInbox {
		t.Fatalf("recorded inbox, variable unset: %s; want inbox", l)
	}

	used := t.TempDir()
	st, err := state.OpenStore(used)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Folder(ctx, "alice@direct.example", "INBOX"); err != nil {
		t.Fatal(err)
	}
	st.Close()
	if l := layoutOf(used, ""); l != imapbackend.LayoutInbox {
		t.Fatalf("data directory used before layouts: %s; want inbox", l)
	}
	if l := layoutOf(used, "FLAT"); l != imapbackend.LayoutFlat {
		t.Fatalf("variable FLAT: %s; want flat", l)
	}
}
