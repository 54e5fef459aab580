package restclient_test

// The adapter to upstream.Provider: every provider answer lands in the
// right class, against real sandbox answers.

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

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

// TestBudgetChargesEveryRequest: under upstream.WithBudget a call costs
// one token per HTTP request it sends (batches, retries), not one per
// call; a call that sends none costs none. The tokens are counted by the
// budget and the requests by the sandbox, over real HTTP.
func TestBudgetChargesEveryRequest(t *testing.T) {
	e, _ := newFaultEnv(t, func(c *ctConfig) { c.client.BatchSize = 2 })
	var uids []int64
	for i := range 5 {
		uids = append(uids, e.deliver(ctBob, "INBOX", ctRaw(ctAlice, ctBob, fmt.Sprintf("m%d", i), "b")))
	}
	b := upstream.NewBudget(1000) // a burst of 1000: nothing waits long
	p := upstream.WithBudget(restclient.Upstream(e.c), b)
	auth := ctAuth(ctBob)
	raws := [][]byte{ctRaw(ctAlice, ctBob, "s1", "b"), ctRaw(ctAlice, ctBob, "s2", "b"), ctRaw(ctAlice, ctBob, "s3", "b")}
	for _, tc := range []struct {
		name     string
		fault    string // sandbox operation failing once with HTTP 500
		requests int
		call     func(ctx context.Context) error
	}{
		{"Raw of 5 UIDs in batches of 2", "", 3, func(ctx context.Context) error {
			got, err := p.Raw(ctx, auth, "INBOX", uids)
			if err == nil && len(got) != 5 {
				err = fmt.Errorf("%d messages", len(got))
			}
			return err
		}},
		{"Messages of 5 UIDs", "", 3, func(ctx context.Context) error {
			_, err := p.Messages(ctx, auth, "INBOX", uids)
			return err
		}},
		{"SetRead of 5 UIDs", "", 3, func(ctx context.Context) error { return p.SetRead(ctx, auth, "INBOX", uids, true) }},
		{"Save of 3 messages", "", 2, func(ctx context.Context) error { return p.Save(ctx, auth, "INBOX.Drafts", raws) }},
		{"Status of 3 smtpIds", "", 2, func(ctx context.Context) error {
			_, err := p.Status(ctx, auth, []string{"a@x", "b@x", "c@x"})
			return err
		}},
		{"UIDs retried after a 500", "GetUIDs", 2, func(ctx context.Context) error {
			_, err := p.UIDs(ctx, auth, "INBOX")
			return err
		}},
		{"Raw of no UIDs", "", 0, func(ctx context.Context) error {
			_, err := p.Raw(ctx, auth, "INBOX", nil)
			return err
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, prio := range []upstream.Priority{upstream.Interactive, upstream.Poll} {
				if tc.fault != "" {
					e.srv.InjectFault(tc.fault, sandbox.Fault{Status: 500, Times: 1})
				}
				before, sent := b.Stats().Granted[prio], e.srv.TotalCalls()
				if err := tc.call(upstream.WithPriority(e.ctx(), prio)); err != nil {
					t.Fatal(err)
				}
				tokens, requests := b.Stats().Granted[prio]-before, e.srv.TotalCalls()-sent
				if int(tokens) != requests || requests != tc.requests {
					t.Errorf("%s: %d tokens of the budget for %d requests the provider saw; want %d of each", prio, tokens, requests, tc.requests)
				}
			}
		})
	}
}

// TestBudgetPacesEveryRequest: the requests of one call wait for their
// tokens one by one. With the burst spent, a call of 3 requests under a
// budget of 20/s takes at least 3 tokens' time (150 ms), where a call
// charged once would take 50 ms.
func TestBudgetPacesEveryRequest(t *testing.T) {
	e, _ := newFaultEnv(t, func(c *ctConfig) { c.client.BatchSize = 2 })
	var uids []int64
	for i := range 5 {
		uids = append(uids, e.deliver(ctBob, "INBOX", ctRaw(ctAlice, ctBob, fmt.Sprintf("m%d", i), "b")))
	}
	start := time.Now() // the bucket fills from here: 23 tokens take 150 ms at least
	b := upstream.NewBudget(20)
	for range 20 {
		if err := b.Wait(e.ctx(), "someone else"); err != nil {
			t.Fatal(err)
		}
	}
	p := upstream.WithBudget(restclient.Upstream(e.c), b)
	if _, err := p.Raw(e.ctx(), ctAuth(ctBob), "INBOX", uids); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d < 145*time.Millisecond {
		t.Errorf("3 requests under a spent budget of 20/s took %v; want at least 150 ms", d)
	}
}

// TestBudgetPrepaidRequests: a prepaid context's first requests do not
// wait again, whichever call sends them; the rest are charged at its
// priority. A merged (coalesced) call's later batches are charged too.
func TestBudgetPrepaidRequests(t *testing.T) {
	e, _ := newFaultEnv(t, func(c *ctConfig) { c.client.BatchSize = 2 })
	var uids []int64
	for i := range 5 {
		uids = append(uids, e.deliver(ctBob, "INBOX", ctRaw(ctAlice, ctBob, fmt.Sprintf("m%d", i), "b")))
	}
	b := upstream.NewBudget(1000)
	p := upstream.WithCoalescing(upstream.WithBudget(restclient.Upstream(e.c), b), b)
	auth := ctAuth(ctBob)
	ctx, err := b.Prepay(upstream.WithPriority(e.ctx(), upstream.ReadAhead), ctBob, 2)
	if err != nil {
		t.Fatal(err)
	}
	if got := b.Stats().Granted[upstream.ReadAhead]; got != 2 {
		t.Fatalf("prepaying 2 requests took %d tokens", got)
	}
	// 3 requests: 2 prepaid, 1 charged.
	if _, err := p.Raw(ctx, auth, "INBOX", uids); err != nil {
		t.Fatal(err)
	}
	if got := b.Stats().Granted[upstream.ReadAhead]; got != 3 {
		t.Errorf("after 3 requests with 2 prepaid: %d tokens, want 3", got)
	}
	// A coalesced SetRead: its first request spends the token its
	// caller waited for; the next two batches wait for their own.
	before, sent := b.Stats().Granted[upstream.Interactive], e.srv.TotalCalls()
	if err := p.SetRead(e.ctx(), auth, "INBOX", uids, true); err != nil {
		t.Fatal(err)
	}
	if tokens, requests := b.Stats().Granted[upstream.Interactive]-before, e.srv.TotalCalls()-sent; int(tokens) != requests || requests != 3 {
		t.Errorf("coalesced SetRead: %d tokens for %d requests; want 3 of each", tokens, requests)
	}
}
