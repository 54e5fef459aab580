package imapbackend

import (
	"go/ast"
	"go/parser"
	"go/token"
	"reflect"
	"testing"

	"github.com/directbridge/directbridge/internal/mailstore"
)

// TestMeteredSessionHasEveryMethod: every command method of session is
// wrapped by meteredSession (metrics.go), so that a command added to the
// session is not silently left out of the metrics. Methods that are not
// commands are listed here.
func TestMeteredSessionHasEveryMethod(t *testing.T) {
	notCommands := map[string]bool{
		"Poll":        true, // runs after every command, and for NOOP
		"AppendLimit": true, // a capability value
	}
	f, err := parser.ParseFile(token.NewFileSet(), "metrics.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	wrapped := map[string]bool{}
	for _, d := range f.Decls {
		fd, ok := d.(*ast.FuncDecl)
		if !ok || fd.Recv == nil {
			continue
		}
		if star, ok := fd.Recv.List[0].Type.(*ast.StarExpr); ok {
			if id, ok := star.X.(*ast.Ident); ok && id.Name == "meteredSession" {
				wrapped[fd.Name.Name] = true
			}
		}
	}
	st := reflect.TypeOf(&session{})
	for i := 0; i < st.NumMethod(); i++ {
		name := st.Method(i).Name
		if !wrapped[name] && !notCommands[name] {
			t.Errorf("session.%s is not wrapped by meteredSession in metrics.go: add it there (or to notCommands here)", name)
		}
	}
}

func TestCommandResult(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want string
	}{
		{nil, "ok"},
		{errNoSuchMailbox, "no"},
		{errNoCondStore, "bad"},
		{errUnavailable, "no"},
		{mailstore.ErrFolderGone, "no"},
	} {
		if got := commandResult(tc.err); got != tc.want {
			t.Errorf("commandResult(%v) = %q; want %q", tc.err, got, tc.want)
		}
	}
}
