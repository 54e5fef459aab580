package restclient_test

// The adapter to upstream.Provider: every provider answer lands in the
// right class, against real sandbox answers.

import (
	"errors"
	"testing"

	"github.com/directbridge/directbridge/restclient"
	"github.com/directbridge/directbridge/sandbox"
	"github.com/directbridge/directbridge/upstream"
)

func TestUpstreamClassifies(t *testing.T) {
	cases := []struct {
		name  string
		op    string // sandbox operation to fault
		fault sandbox.Fault
		call  func(p upstream.Provider, e *ctEnv) error
		class error
		busy  bool
	}{
		{"auth", "GetUIDs", sandbox.Fault{Code: 1}, readUIDs, upstream.ErrAuth, false},
		{"address", "GetUIDs", sandbox.Fault{Code: 2}, readUIDs, upstream.ErrAddress, false},
		{"refused", "GetUIDs", sandbox.Fault{Code: 3}, readUIDs, upstream.ErrRefused, false},
		{"code 4 is temporary", "GetUIDs", sandbox.Fault{Code: 4}, readUIDs, upstream.ErrTemporary, false},
		{"read 503", "GetUIDs", sandbox.Fault{Status: 503}, readUIDs, upstream.ErrTemporary, false},
		{"read 429", "GetUIDs", sandbox.Fault{Status: 429}, readUIDs, upstream.ErrTemporary, true},
		{"read malformed", "GetUIDs", sandbox.Fault{Malformed: true}, readUIDs, upstream.ErrTemporary, false},
		{"save done, answer lost", "SaveRawMessages", sandbox.Fault{Reset: true, After: true}, save, upstream.ErrUnknownOutcome, false},
		{"save malformed 200", "SaveRawMessages", sandbox.Fault{Malformed: true, After: true}, save, upstream.ErrUnknownOutcome, false},
		{"save refused", "SaveRawMessages", sandbox.Fault{Code: 3}, save, upstream.ErrRefused, false},
		{"no such folder", "", sandbox.Fault{}, func(p upstream.Provider, e *ctEnv) error {
			_, err := p.UIDs(e.ctx(), ctAuth(ctBob), "INBOX.Nowhere")
			return err
		}, upstream.ErrRefused, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e, _ := newFaultEnv(t, func(c *ctConfig) { c.client.MaxRetries = -1 })
			if tc.op != "" {
				e.srv.InjectFault(tc.op, tc.fault)
			}
			err := tc.call(restclient.Upstream(e.c), e)
			if !errors.Is(err, tc.class) {
				t.Fatalf("error %v is not %v", err, tc.class)
			}
			if d := upstream.Detail(err); d == nil || d.Busy != tc.busy {
				t.Fatalf("detail of %v: %+v, want busy %v", err, d, tc.busy)
			}
		})
	}
}

func readUIDs(p upstream.Provider, e *ctEnv) error {
	_, err := p.UIDs(e.ctx(), ctAuth(ctBob), "INBOX")
	return err
}

func save(p upstream.Provider, e *ctEnv) error {
	return p.Save(e.ctx(), ctAuth(ctBob), "INBOX", [][]byte{ctRaw(ctAlice, ctBob, "s", "b")})
}

func TestUpstreamRawAndSave(t *testing.T) {
	e, _ := newFaultEnv(t)
	p := restclient.Upstream(e.c)
	raw := ctRaw(ctAlice, ctBob, "subject", "body")
	if err := p.Save(e.ctx(), ctAuth(ctBob), "INBOX", [][]byte{raw}); err != nil {
		t.Fatal(err)
	}
	uids, err := p.UIDs(e.ctx(), ctAuth(ctBob), "INBOX")
	if err != nil || len(uids) != 1 {
		t.Fatalf("UIDs = %v, %v", uids, err)
	}
	got, err := p.Raw(e.ctx(), ctAuth(ctBob), "INBOX", []int64{uids[0], uids[0] + 100})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || string(got[uids[0]]) != string(raw) {
		t.Fatalf("Raw = %d messages, want the saved bytes back", len(got))
	}
}
