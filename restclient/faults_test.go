package restclient_test

// Fault-injection tests: the client's retry, back-off and error
// classification against real sandbox answers (sandbox.Fault), with a fake
// client clock whose Sleep returns at once and records the delay.

import (
	"errors"
	"testing"
	"time"

	"github.com/directbridge/directbridge/restclient"
	"github.com/directbridge/directbridge/sandbox"
	"github.com/directbridge/directbridge/upstream/directapi"
)

// newFaultEnv starts a sandbox whose client has its own fake clock (so
// back-off sleeps are recorded, not waited for, and do not move the
// sandbox's time).
func newFaultEnv(t *testing.T, mods ...func(*ctConfig)) (*ctEnv, *testClock) {
	t.Helper()
	cc := newTestClock()
	e := newCtEnv(t, append([]func(*ctConfig){func(c *ctConfig) { c.client.Clock = cc }}, mods...)...)
	return e, cc
}

func note(to string) directapi.Message {
	return directapi.Message{Sender: ctAlice, Subject: "fault test", Body: "b",
		Recipients: []directapi.Recipient{{Email: to, Type: directapi.TO}}}
}

func wantSleeps(t *testing.T, c *testClock, want ...time.Duration) {
	t.Helper()
	got := c.Sleeps()
	if len(got) != len(want) {
		t.Fatalf("sleeps = %v, want %v", got, want)
	}
	for i := range got {
		if got[i] != want[i] {
			t.Fatalf("sleeps = %v, want %v", got, want)
		}
	}
}

func TestFaults(t *testing.T) {
	t.Run("GetUIDs500OnceIsRetried", func(t *testing.T) {
		t.Parallel()
		e, cc := newFaultEnv(t)
		uid := e.deliver(ctBob, "INBOX", ctRaw(ctAlice, ctBob, "x", "x"))
		e.srv.InjectFault("GetUIDs", sandbox.Fault{Status: 500, Times: 1})
		uids, err := e.c.GetUIDs(e.ctx(), ctAuth(ctBob), "INBOX")
		e.must(err, "GetUIDs after one 500")
		wantInts(t, "uids", uids, []int64{uid})
		wantN(t, "GetUIDs calls", e.srv.Calls("GetUIDs"), 2)
		wantSleeps(t, cc, time.Second)
	})

	t.Run("Send429RetryAfter", func(t *testing.T) {
		t.Parallel()
		e, cc := newFaultEnv(t)
		e.srv.InjectFault("Send", sandbox.Fault{Status: 429, RetryAfter: "2", Times: 1})
		id, err := e.c.Send(e.ctx(), ctAuth(ctAlice), note(ctBob))
		e.must(err, "Send after a 429")
		wantN(t, "Send calls", e.srv.Calls("Send"), 2)
		wantSleeps(t, cc, 2*time.Second)
		// Delivered exactly once.
		ms := e.messages(ctBob, "INBOX")
		if len(ms) != 1 || ms[0].MsgID != "<"+id+">" {
			t.Fatalf("bob INBOX: %d messages", len(ms))
		}
		wantN(t, "alice INBOX.Sent", e.count(ctAlice, "INBOX.Sent"), 1)
	})

	t.Run("Send429ExhaustsRetries", func(t *testing.T) {
		t.Parallel()
		e, cc := newFaultEnv(t)
		e.srv.InjectFault("Send", sandbox.Fault{Status: 429})
		_, err := e.c.Send(e.ctx(), ctAuth(ctAlice), note(ctBob))
		var te *restclient.TemporaryError
		if !errors.As(err, &te) || te.StatusCode != 429 {
			t.Fatalf("err = %v, want TemporaryError 429", err)
		}
		if restclient.OutcomeUnknown(err) {
			t.Error("a 429 was not processed, yet OutcomeUnknown is true")
		}
		wantN(t, "Send calls", e.srv.Calls("Send"), restclient.DefaultMaxRetries+1)
		wantSleeps(t, cc, time.Second, 2*time.Second, 4*time.Second)
		wantN(t, "bob INBOX", e.count(ctBob, "INBOX"), 0)
	})

	t.Run("Send500NotRetried", func(t *testing.T) {
		t.Parallel()
		e, cc := newFaultEnv(t)
		e.srv.InjectFault("Send", sandbox.Fault{Status: 500, Times: 1})
		_, err := e.c.Send(e.ctx(), ctAuth(ctAlice), note(ctBob))
		if !restclient.OutcomeUnknown(err) || !restclient.IsTemporary(err) {
			t.Fatalf("err = %v, want a temporary error with unknown outcome", err)
		}
		var te *restclient.TemporaryError
		if !errors.As(err, &te) || te.StatusCode != 500 {
			t.Fatalf("err = %v, want HTTP 500", err)
		}
		wantN(t, "Send calls", e.srv.Calls("Send"), 1)
		wantSleeps(t, cc)
		wantN(t, "bob INBOX (the fault answered before sending)", e.count(ctBob, "INBOX"), 0)
	})

	t.Run("SendResetAfterDelivery", func(t *testing.T) {
		t.Parallel()
		e, cc := newFaultEnv(t)
		e.srv.InjectFault("Send", sandbox.Fault{After: true, Reset: true, Times: 1})
		_, err := e.c.Send(e.ctx(), ctAuth(ctAlice), note(ctBob))
		if err == nil {
			t.Fatal("Send succeeded through a reset connection")
		}
		if !restclient.OutcomeUnknown(err) {
			t.Fatalf("err = %v (%T), want OutcomeUnknown", err, err)
		}
		wantN(t, "Send calls (no blind retry)", e.srv.Calls("Send"), 1)
		wantSleeps(t, cc)
		// The provider did the work: exactly one delivery.
		wantN(t, "bob INBOX", e.count(ctBob, "INBOX"), 1)
		wantN(t, "alice INBOX.Sent", e.count(ctAlice, "INBOX.Sent"), 1)
	})

	t.Run("ResetOnRepeatableIsRetried", func(t *testing.T) {
		t.Parallel()
		e, cc := newFaultEnv(t)
		e.deliver(ctBob, "INBOX", ctRaw(ctAlice, ctBob, "x", "x"))
		e.srv.InjectFault("GetMessageCount", sandbox.Fault{Reset: true, Times: 1})
		n, err := e.c.GetMessageCount(e.ctx(), ctAuth(ctBob), "INBOX")
		e.must(err, "GetMessageCount after a reset")
		wantN(t, "count", n, 1)
		wantN(t, "GetMessageCount calls", e.srv.Calls("GetMessageCount"), 2)
		wantSleeps(t, cc, time.Second)
	})

	t.Run("CreateFolder503AfterNotRetried", func(t *testing.T) {
		t.Parallel()
		e, _ := newFaultEnv(t)
		e.srv.InjectFault("CreateFolder", sandbox.Fault{Status: 503, After: true, Times: 1})
		err := e.c.CreateFolder(e.ctx(), ctAuth(ctBob), "INBOX.New")
		if !restclient.OutcomeUnknown(err) {
			t.Fatalf("err = %v, want OutcomeUnknown", err)
		}
		wantN(t, "CreateFolder calls", e.srv.Calls("CreateFolder"), 1)
		// It was carried out; a blind retry would have failed with "exists".
		wantN(t, "new folder", e.count(ctBob, "INBOX.New"), 0)
	})

	t.Run("Malformed", func(t *testing.T) {
		t.Parallel()
		e, cc := newFaultEnv(t)
		e.srv.InjectFault("GetUIDs", sandbox.Fault{Malformed: true, Times: 1})
		_, err := e.c.GetUIDs(e.ctx(), ctAuth(ctBob), "INBOX")
		var pe *restclient.ProtocolError
		if !errors.As(err, &pe) {
			t.Fatalf("err = %v (%T), want *restclient.ProtocolError", err, err)
		}
		if restclient.IsTemporary(err) || restclient.IsAPIError(err) {
			t.Errorf("err = %v classified as temporary or API error", err)
		}
		wantN(t, "GetUIDs calls", e.srv.Calls("GetUIDs"), 1)
		wantSleeps(t, cc)
	})

	t.Run("Code4NotRetried", func(t *testing.T) {
		t.Parallel()
		e, cc := newFaultEnv(t)
		e.srv.InjectFault("GetMessageCount", sandbox.Fault{Code: 4})
		_, err := e.c.GetMessageCount(e.ctx(), ctAuth(ctBob), "INBOX")
		wantAPICode(t, err, 4)
		if restclient.IsTemporary(err) || restclient.IsAuthFailure(err) {
			t.Errorf("err = %v misclassified", err)
		}
		wantN(t, "GetMessageCount calls", e.srv.Calls("GetMessageCount"), 1)
		wantSleeps(t, cc)
		e.srv.ClearFaults()
		_, err = e.c.GetMessageCount(e.ctx(), ctAuth(ctBob), "INBOX")
		e.must(err, "after clearing faults")
	})

	t.Run("LatencyTimeout", func(t *testing.T) {
		t.Parallel()
		e, cc := newFaultEnv(t, func(c *ctConfig) { c.client.RequestTimeout = 100 * time.Millisecond })
		e.srv.InjectFault("GetUIDs", sandbox.Fault{Latency: 300 * time.Millisecond})
		start := time.Now()
		_, err := e.c.GetUIDs(e.ctx(), ctAuth(ctBob), "INBOX")
		if !restclient.IsTemporary(err) {
			t.Fatalf("err = %v (%T), want a TemporaryError", err, err)
		}
		if !restclient.OutcomeUnknown(err) {
			t.Errorf("a timed-out request may have reached the provider: OutcomeUnknown should be true")
		}
		wantN(t, "GetUIDs attempts", e.srv.Calls("GetUIDs"), restclient.DefaultMaxRetries+1)
		wantSleeps(t, cc, time.Second, 2*time.Second, 4*time.Second)
		// Four attempts of 100 ms; the 7 s of back-off passed on the fake clock.
		if d := time.Since(start); d > 3*time.Second {
			t.Errorf("four attempts took %v: back-off did not use the client's clock", d)
		}
	})

	t.Run("LatencyWithinTimeout", func(t *testing.T) {
		t.Parallel()
		e, _ := newFaultEnv(t, func(c *ctConfig) { c.client.RequestTimeout = time.Second })
		e.srv.InjectFault("GetUIDs", sandbox.Fault{Latency: 50 * time.Millisecond, Times: 1})
		_, err := e.c.GetUIDs(e.ctx(), ctAuth(ctBob), "INBOX")
		e.must(err, "slow but in time")
		wantN(t, "GetUIDs calls", e.srv.Calls("GetUIDs"), 1)
	})

	t.Run("Registrar011Once", func(t *testing.T) {
		t.Parallel()
		e, _ := newFaultEnv(t)
		r := e.c.NewRegistrar(ctReseller, directapi.Secret(ctPasswords[ctReseller]))
		e.srv.InjectFault("GetPatientAddressByUsername", sandbox.Fault{RegCode: "011", Times: 1})
		users, err := r.GetPatientAddressByUsername(e.ctx(), ctDomain, "bob")
		e.must(err, "Registrar after one 011")
		if len(users) != 1 || users[0].Username != "bob" {
			t.Errorf("users %+v", users)
		}
		wantN(t, "Login calls", e.srv.Calls("Login"), 2)
		wantN(t, "GetPatientAddressByUsername calls", e.srv.Calls("GetPatientAddressByUsername"), 2)

		// A persistent 011 is retried once only.
		e.srv.InjectFault("GetPatientAddressByUsername", sandbox.Fault{RegCode: "011"})
		_, err = r.GetPatientAddressByUsername(e.ctx(), ctDomain, "bob")
		wantRegCode(t, err, "011")
		wantN(t, "Login calls after a persistent 011", e.srv.Calls("Login"), 3)
		wantN(t, "calls after a persistent 011", e.srv.Calls("GetPatientAddressByUsername"), 4)
	})
}
