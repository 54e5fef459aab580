package sandbox

import (
	"maps"
	"net/http"
	"slices"
	"sync"
	"time"
)

// This file is the sandbox's test double side: call counters, recorded
// request bodies and fault injection. They are Go methods only, never HTTP
// endpoints, so no REST client can reach them.

// Fault describes a failure to inject into the answers of one operation.
// Exactly one kind of failure should be set; Latency may accompany any.
type Fault struct {
	// Latency delays the answer.
	Latency time.Duration
	// Status answers with this HTTP status (e.g. 500, 503, 429) and a JSON
	// error body, without carrying out the operation (unless After).
	Status int
	// RetryAfter, when set with Status, is sent as the Retry-After header.
	RetryAfter string
	// Reset closes the connection without any answer.
	Reset bool
	// Malformed answers HTTP 200 with a body that is not JSON.
	Malformed bool
	// Code answers success=false with this messaging code (1..4).
	Code int
	// RegCode answers success=false with this registration code ("011"...).
	RegCode string
	// After carries out the operation first and then fails the answer:
	// the provider did the work but the client cannot know. This is the
	// case that makes a blind retry of Send deliver twice.
	After bool
	// Late makes Latency a delay of the processing that the client
	// cannot cancel: the operation is carried out after Latency even if
	// the client gave up waiting (a provider that processes a send after
	// the bridge's timeout).
	Late bool
	// Times is how many calls the fault applies to; 0 means until cleared.
	Times int
}

type testHooks struct {
	mu       sync.Mutex
	counts   map[string]int
	faults   map[string]*Fault
	requests map[string][][]byte
	keep     int
}

func newTestHooks(keep int) *testHooks {
	return &testHooks{counts: map[string]int{}, faults: map[string]*Fault{}, requests: map[string][][]byte{}, keep: keep}
}

// Calls returns how many requests reached operation op (e.g. "GetUIDs",
// "Login"), including failed and faulted ones.
func (s *Server) Calls(op string) int {
	s.hooks.mu.Lock()
	defer s.hooks.mu.Unlock()
	return s.hooks.counts[op]
}

// CallCounts returns a copy of all counters.
func (s *Server) CallCounts() map[string]int {
	s.hooks.mu.Lock()
	defer s.hooks.mu.Unlock()
	return maps.Clone(s.hooks.counts)
}

// TotalCalls returns the number of requests of all operations.
func (s *Server) TotalCalls() int {
	s.hooks.mu.Lock()
	defer s.hooks.mu.Unlock()
	n := 0
	for _, c := range s.hooks.counts {
		n += c
	}
	return n
}

// ResetCalls sets all counters to zero and forgets recorded requests.
func (s *Server) ResetCalls() {
	s.hooks.mu.Lock()
	defer s.hooks.mu.Unlock()
	clear(s.hooks.counts)
	clear(s.hooks.requests)
}

// Requests returns the bodies of the latest requests of op (at most
// Options.KeepRequests; none unless set), oldest first, as received.
// Golden tests compare them with expectations. Operations read as they
// stream in (SaveRawMessages) have no body kept.
func (s *Server) Requests(op string) [][]byte {
	s.hooks.mu.Lock()
	defer s.hooks.mu.Unlock()
	return append([][]byte(nil), s.hooks.requests[op]...)
}

// InjectFault makes the next calls of op fail as f says. op "*" applies
// to every operation that has no fault of its own.
func (s *Server) InjectFault(op string, f Fault) {
	s.hooks.mu.Lock()
	defer s.hooks.mu.Unlock()
	s.hooks.faults[op] = &f
}

// ClearFaults removes every injected fault.
func (s *Server) ClearFaults() {
	s.hooks.mu.Lock()
	defer s.hooks.mu.Unlock()
	clear(s.hooks.faults)
}

// record counts a call, keeps its body and returns the fault to apply, if any.
func (h *testHooks) record(op string, body []byte) *Fault {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.counts[op]++
	if h.keep > 0 {
		reqs := append(h.requests[op], body)
		if len(reqs) > h.keep {
			reqs = slices.Clone(reqs[len(reqs)-h.keep:]) // let the oldest go
		}
		h.requests[op] = reqs
	}
	key := op
	f := h.faults[key]
	if f == nil {
		key = "*"
		f = h.faults[key]
	}
	if f == nil {
		return nil
	}
	out := *f
	if f.Times > 0 {
		f.Times--
		if f.Times == 0 {
			delete(h.faults, key)
		}
	}
	return &out
}

// fails reports whether the fault replaces the answer (apply writes one),
// rather than only adding latency.
func (f *Fault) fails() bool {
	return f.Reset || f.Status != 0 || f.Malformed || f.Code != 0 || f.RegCode != ""
}

// apply writes the fault's answer. It reports false when the fault only
// adds latency and the normal answer should follow.
func (f *Fault) apply(w http.ResponseWriter, envelope func(code int) any, regEnvelope func(code string) any) bool {
	switch {
	case f.Reset:
		if hj, ok := w.(http.Hijacker); ok {
			if conn, _, err := hj.Hijack(); err == nil {
				conn.Close()
				return true
			}
		}
		panic(http.ErrAbortHandler) // net/http closes the connection without answering
	case f.Status != 0:
		if f.RetryAfter != "" {
			w.Header().Set("Retry-After", f.RetryAfter)
		}
		writeJSON(w, f.Status, envelope(CodeServerError))
		return true
	case f.Malformed:
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusOK)
		w.Write([]byte(`{"success": tru`))
		return true
	case f.Code != 0:
		writeJSON(w, http.StatusOK, envelope(f.Code))
		return true
	case f.RegCode != "":
		writeJSON(w, http.StatusOK, regEnvelope(f.RegCode))
		return true
	}
	return false
}
