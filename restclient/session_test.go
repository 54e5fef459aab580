package restclient

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/directbridge/directbridge/upstream/directapi"
)

// fakeRegistration is a registration service that issues sessions S1, S2,
// ... and answers "011" for a session it does not know.
type fakeRegistration struct {
	t   *testing.T
	srv *httptest.Server

	mu         sync.Mutex
	logins     int
	calls      int      // every non-login request
	used       []string // sessionIds of the non-login requests, in order
	valid      map[string]bool
	loginFail  bool          // answer login with 011
	rejectAll  bool          // answer every other request with 011
	loginDelay time.Duration // real delay of login, to make callers overlap
	errCode    string        // when set, answer other requests with this failure code
}

func newFakeRegistration(t *testing.T) *fakeRegistration {
	f := &fakeRegistration{t: t, valid: map[string]bool{}}
	f.srv = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fakeRegistration) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	rest, ok := strings.CutPrefix(r.URL.Path, regPrefix+"/")
	if !ok {
		f.t.Errorf("request outside the registration service: %s", r.URL.Path)
		w.WriteHeader(404)
		return
	}
	seg := strings.Split(rest, "/")
	if seg[0] == "login" {
		var req directapi.LoginRequest
		if err := json.Unmarshal(body, &req); err != nil || req.Username != "reseller" || req.Password.Reveal() != "pw-reseller" {
			f.t.Errorf("login body %s", body)
		}
		f.mu.Lock()
		f.logins++
		n, fail, delay := f.logins, f.loginFail, f.loginDelay
		id := fmt.Sprintf("S%d", n)
		if !fail {
			f.valid[id] = true
		}
		f.mu.Unlock()
		if delay > 0 {
			time.Sleep(delay)
		}
		if fail {
			io.WriteString(w, `{"code":"011","success":false,"errorMessage":"authentication failed"}`)
			return
		}
		fmt.Fprintf(w, `{"code":"000","success":true,"sessionId":%q}`, id)
		return
	}
	if len(seg) < 3 {
		f.t.Errorf("short path %s", r.URL.Path)
		w.WriteHeader(404)
		return
	}
	session := seg[1]
	f.mu.Lock()
	f.calls++
	f.used = append(f.used, session)
	ok = f.valid[session] && !f.rejectAll
	code := f.errCode
	f.mu.Unlock()
	switch {
	case !ok:
		io.WriteString(w, `{"code":"011","success":false,"errorMessage":"invalid session"}`)
	case code != "":
		fmt.Fprintf(w, `{"code":%q,"success":false,"errorMessage":"failure"}`, code)
	case seg[0] == "GetPatientAddressByUsername" && len(seg) == 4:
		fmt.Fprintf(w, `{"code":"000","success":true,"patient":[{"username":%q,"userType":"SMTP","UserStateType":"activated"}]}`, seg[3])
	case seg[0] == "GetPatientAddressByMeta":
		io.WriteString(w, `{"code":"000","success":true,"patient":[{"username":"john.doe","userType":"SMTP","UserStateType":"provisioned"}]}`)
	case seg[0] == "ProvisionIDProofedPatient":
		io.WriteString(w, `{"code":"000","success":true,"users":[{"username":"john.doe","userType":"SMTP","UserStateType":"provisioned"}]}`)
	default:
		io.WriteString(w, `{"code":"000","success":true}`)
	}
}

// dropAll forgets every session, as a provider restart would.
func (f *fakeRegistration) dropAll() {
	f.mu.Lock()
	clear(f.valid)
	f.mu.Unlock()
}

func (f *fakeRegistration) counts() (logins, calls int, used []string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.logins, f.calls, slices.Clone(f.used)
}

func (f *fakeRegistration) registrar(t *testing.T, fc *fakeClock) *Registrar {
	c := newTestClient(t, f.srv.URL, fc)
	return c.NewRegistrar("reseller", "pw-reseller")
}

func lookup(t *testing.T, r *Registrar, username string) error {
	t.Helper()
	users, err := r.GetPatientAddressByUsername(context.Background(), "patients.direct.example", username)
	if err == nil && (len(users) != 1 || users[0].Username != username || users[0].UserStateType != directapi.UserStateActivated) {
		t.Fatalf("GetPatientAddressByUsername(%s) = %+v", username, users)
	}
	return err
}

func TestRegistrarLogsInOnceAndReuses(t *testing.T) {
	f := newFakeRegistration(t)
	fc := newFakeClock()
	r := f.registrar(t, fc)
	if logins, _, _ := f.counts(); logins != 0 {
		t.Fatal("NewRegistrar logged in eagerly")
	}
	for i := range 5 {
		if err := lookup(t, r, fmt.Sprintf("user%d", i)); err != nil {
			t.Fatal(err)
		}
		fc.Advance(2 * time.Minute) // 0, 2, 4, 6, 8 minutes after login
	}
	ctx := context.Background()
	fc.Advance(59*time.Second - 2*time.Minute) // 8:59 after login
	if _, err := r.GetPatientAddressByMeta(ctx, "patients.direct.example", directapi.IDProofedIndividual{ID: 1}); err != nil {
		t.Fatal(err)
	}
	logins, calls, used := f.counts()
	if logins != 1 {
		t.Fatalf("%d logins within 9 minutes; want 1", logins)
	}
	if calls != 6 || slices.ContainsFunc(used, func(s string) bool { return s != "S1" }) {
		t.Fatalf("calls %d with sessions %v; want 6 with S1", calls, used)
	}
}

func TestRegistrarRenewsBeforeExpiry(t *testing.T) {
	f := newFakeRegistration(t)
	fc := newFakeClock()
	r := f.registrar(t, fc)
	ctx := context.Background()
	id, err := r.SessionID(ctx)
	if err != nil || id.Reveal() != "S1" {
		t.Fatalf("SessionID = %q, %v", id.Reveal(), err)
	}
	fc.Advance(SessionLifetime - DefaultRenewMargin - time.Millisecond)
	if id, _ := r.SessionID(ctx); id.Reveal() != "S1" {
		t.Fatalf("just before 9 minutes: session %q; want S1", id.Reveal())
	}
	fc.Advance(time.Millisecond) // 9 minutes: the 10-minute lifetime minus the 1-minute margin
	if err := lookup(t, r, "jdoe"); err != nil {
		t.Fatal(err)
	}
	logins, _, used := f.counts()
	if logins != 2 || !slices.Equal(used, []string{"S2"}) {
		t.Fatalf("after 9 minutes: %d logins, sessions used %v; want 2 and [S2]", logins, used)
	}
	// The new session's clock starts at its own login.
	fc.Advance(8 * time.Minute)
	if id, _ := r.SessionID(ctx); id.Reveal() != "S2" {
		t.Fatalf("8 minutes into S2: session %q", id.Reveal())
	}
	fc.Advance(time.Minute)
	if id, _ := r.SessionID(ctx); id.Reveal() != "S3" {
		t.Fatalf("9 minutes into S2: session %q; want S3", id.Reveal())
	}
}

func TestRegistrarReloginOnDroppedSession(t *testing.T) {
	f := newFakeRegistration(t)
	fc := newFakeClock()
	r := f.registrar(t, fc)
	if err := lookup(t, r, "a"); err != nil {
		t.Fatal(err)
	}
	f.dropAll() // the provider restarted: S1 is gone although young
	fc.Advance(time.Minute)
	if err := lookup(t, r, "b"); err != nil {
		t.Fatalf("after the provider dropped the session: %v", err)
	}
	logins, calls, used := f.counts()
	if logins != 2 {
		t.Fatalf("%d logins; want 2", logins)
	}
	if calls != 3 || !slices.Equal(used, []string{"S1", "S1", "S2"}) {
		t.Fatalf("calls %d with %v; want the rejected call retried exactly once with S2", calls, used)
	}
	// Provisioning is retried too: a 011 means it was refused, not done.
	f.dropAll()
	resp, err := r.ProvisionIDProofedPatient(context.Background(), "patients.direct.example", gPatient)
	if err != nil || len(resp.Users) != 1 {
		t.Fatalf("ProvisionIDProofedPatient = %+v, %v", resp, err)
	}
	if logins, _, used := f.counts(); logins != 3 || !slices.Equal(used[3:], []string{"S2", "S3"}) {
		t.Fatalf("%d logins, sessions %v", logins, used)
	}
}

func TestRegistrarSecond011IsReturned(t *testing.T) {
	f := newFakeRegistration(t)
	f.rejectAll = true
	fc := newFakeClock()
	r := f.registrar(t, fc)
	err := r.SetPatientsPasswords(context.Background(), "patients.direct.example", []directapi.UserPassword{{Username: "jdoe", Password: "x"}})
	var ae *APIError
	if !IsAuthFailure(err) || !errors.As(err, &ae) || ae.RegCode != "011" || ae.Op != "SetPatientsPasswords" {
		t.Fatalf("err = %#v; want the second 011", err)
	}
	logins, calls, used := f.counts()
	if logins != 2 || calls != 2 || !slices.Equal(used, []string{"S1", "S2"}) {
		t.Fatalf("%d logins, %d calls (%v); want 2 and 2: one retry, no loop", logins, calls, used)
	}
	// A session refused twice is dropped too: the next call starts with a
	// fresh login (S3), and again retries at most once (S4).
	if err := lookup(t, r, "x"); !IsAuthFailure(err) {
		t.Fatalf("err = %v", err)
	}
	if logins, calls, used := f.counts(); logins != 4 || calls != 4 || !slices.Equal(used[2:], []string{"S3", "S4"}) {
		t.Fatalf("%d logins, %d calls (%v); want 4 and 4", logins, calls, used)
	}
}

func TestRegistrarOtherErrorsNotRetried(t *testing.T) {
	f := newFakeRegistration(t)
	f.errCode = directapi.RegCodeAddressNotFound
	r := f.registrar(t, newFakeClock())
	err := lookup(t, r, "nobody")
	var ae *APIError
	if !errors.As(err, &ae) || ae.RegCode != "210" || IsAuthFailure(err) {
		t.Fatalf("err = %#v", err)
	}
	if logins, calls, _ := f.counts(); logins != 1 || calls != 1 {
		t.Fatalf("%d logins, %d calls; want 1 and 1", logins, calls)
	}
}

func TestRegistrarLoginFailure(t *testing.T) {
	f := newFakeRegistration(t)
	f.loginFail = true
	fc := newFakeClock()
	r := f.registrar(t, fc)
	err := lookup(t, r, "jdoe")
	var ae *APIError
	if !IsAuthFailure(err) || !errors.As(err, &ae) || ae.RegCode != "011" || ae.Op != "Login" {
		t.Fatalf("err = %#v; want the login's 011", err)
	}
	logins, calls, _ := f.counts()
	if logins != 1 || calls != 0 {
		t.Fatalf("%d logins, %d calls; want 1 login and no call", logins, calls)
	}
	if strings.Contains(err.Error(), "pw-reseller") {
		t.Fatalf("error reveals the password: %v", err)
	}
	// A failed login is not cached: once the account works, so does the Registrar.
	f.mu.Lock()
	f.loginFail = false
	f.mu.Unlock()
	if err := lookup(t, r, "jdoe"); err != nil {
		t.Fatal(err)
	}
	if logins, calls, _ := f.counts(); logins != 2 || calls != 1 {
		t.Fatalf("%d logins, %d calls; want 2 and 1", logins, calls)
	}
}

func TestRegistrarConcurrentCallsShareOneLogin(t *testing.T) {
	f := newFakeRegistration(t)
	f.loginDelay = 5 * time.Millisecond
	fc := newFakeClock()
	r := f.registrar(t, fc)
	var wg sync.WaitGroup
	errs := make(chan error, 10)
	for i := range 10 {
		wg.Go(func() {
			users, err := r.GetPatientAddressByUsername(context.Background(), "patients.direct.example", fmt.Sprintf("u%d", i))
			if err == nil && (len(users) != 1 || users[0].Username != fmt.Sprintf("u%d", i)) {
				err = fmt.Errorf("goroutine %d got %+v", i, users)
			}
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
	logins, calls, used := f.counts()
	if logins != 1 || calls != 10 {
		t.Fatalf("%d logins, %d calls; want 1 and 10", logins, calls)
	}
	if slices.ContainsFunc(used, func(s string) bool { return s != "S1" }) {
		t.Fatalf("sessions used %v", used)
	}

	// All ten meet a dropped session at once: one new login serves them all.
	f.dropAll()
	var wg2 sync.WaitGroup
	for i := range 10 {
		wg2.Go(func() {
			if err := r.SetPatientsPasswords(context.Background(), "patients.direct.example", []directapi.UserPassword{{Username: fmt.Sprint(i), Password: "x"}}); err != nil {
				t.Error(err)
			}
		})
	}
	wg2.Wait()
	// Every goroutine ends with one successful call on S2; those that met
	// S1 first were rejected once, and the first rejection was enough to
	// renew the session for everybody.
	logins, _, used = f.counts()
	phase2 := used[10:]
	s1 := countOf(phase2, "S1")
	if logins != 2 || countOf(phase2, "S2") != 10 || s1 < 1 || len(phase2) != 10+s1 {
		t.Fatalf("after a drop: %d logins, sessions used %v; want 2 logins and 10 calls with S2", logins, phase2)
	}
}

func TestRegistrarContextCancelled(t *testing.T) {
	f := newFakeRegistration(t)
	r := f.registrar(t, newFakeClock())
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := r.GetPatientAddressByUsername(ctx, "d.example", "jdoe"); !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v; want context.Canceled", err)
	}
	if logins, calls, _ := f.counts(); logins != 0 || calls != 0 {
		t.Fatalf("%d logins, %d calls with a cancelled context", logins, calls)
	}
}

func countOf(s []string, v string) int {
	n := 0
	for _, x := range s {
		if x == v {
			n++
		}
	}
	return n
}
