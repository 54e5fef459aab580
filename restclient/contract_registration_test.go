package restclient_test

// Contract tests of the 5 registration operations (registration-rest.md,
// "Endpoints") and of the Registrar session keeper, through restclient
// against the sandbox over real HTTP.

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/directbridge/directbridge/restclient"
	"github.com/directbridge/directbridge/sandbox"
	"github.com/directbridge/directbridge/upstream/directapi"
)

func ctLogin(e *ctEnv) directapi.Secret {
	e.t.Helper()
	id, err := e.c.Login(e.ctx(), directapi.LoginRequest{Username: ctReseller, Password: directapi.Secret(ctPasswords[ctReseller])})
	e.must(err, "Login")
	if id == "" {
		e.t.Fatal("Login returned an empty sessionId")
	}
	return id
}

// jane is an identity-proofed patient.
var jane = directapi.IDProofedIndividual{FirstName: "Jane", LastName: "Doe", SSN4: "1234", DOB: "1980-03-07"}

func provisionJane(e *ctEnv, session directapi.Secret) *directapi.AddUsersResponseV2Type {
	e.t.Helper()
	resp, err := e.c.ProvisionIDProofedPatient(e.ctx(), session, ctDomain, directapi.IDProofedIndividualRESTful{
		IDProofedIndividual: jane, DirectUsername: "jane.doe", DirectPassword: "jane-secret-1"})
	e.must(err, "ProvisionIDProofedPatient")
	return resp
}

func janeAuth(password string) directapi.Authentication {
	return directapi.Authentication{Username: "jane.doe@" + ctDomain, Password: directapi.Secret(password)}
}

func TestContractRegistration(t *testing.T) {
	t.Run("Login", func(t *testing.T) {
		t.Parallel()
		e := newCtEnv(t)
		s1, s2 := ctLogin(e), ctLogin(e)
		if s1 == s2 {
			t.Error("two logins gave the same sessionId")
		}
		_, err := e.c.Login(e.ctx(), directapi.LoginRequest{Username: ctReseller, Password: "wrong"})
		wantRegCode(t, err, "011")
		wantAuthFailure(t, err)
		_, err = e.c.Login(e.ctx(), directapi.LoginRequest{Username: "nobody", Password: "whatever"})
		wantRegCode(t, err, "011")
		// A mailbox user is not a registration account.
		_, err = e.c.Login(e.ctx(), directapi.LoginRequest{Username: ctAlice, Password: directapi.Secret(ctPasswords[ctAlice])})
		wantRegCode(t, err, "011")
		_, err = e.c.Login(e.ctx(), directapi.LoginRequest{Username: ctReseller})
		wantRegCode(t, err, "010")
		_, err = e.c.Login(e.ctx(), directapi.LoginRequest{Password: "x"})
		wantRegCode(t, err, "010")
		wantN(t, "Login calls", e.srv.Calls("Login"), 7)
	})

	t.Run("ProvisionIDProofedPatient", func(t *testing.T) {
		t.Parallel()
		e := newCtEnv(t)
		s := ctLogin(e)
		resp := provisionJane(e, s)
		if !resp.Success || resp.Code != "000" || len(resp.Users) != 1 {
			t.Fatalf("response %+v", resp)
		}
		u := resp.Users[0]
		if u.Username != "jane.doe" || u.FirstName != "Jane" || u.LastName != "Doe" ||
			u.UserType != directapi.UserTypeSMTP || u.UserStateType != directapi.UserStateActivated {
			t.Errorf("user %+v", u)
		}
		if u.EndpointPassword != "" {
			t.Error("the response carries a password")
		}
		pc := resp.PaymentConfirmation
		if pc == nil || len(pc.Products) != 1 || pc.Products[0].Quantity != 1 || pc.Amount != pc.Products[0].Amount || pc.OrderTime.IsZero() {
			t.Errorf("paymentConfirmation %+v", pc)
		}
		// The new patient's mailbox works on the messaging service.
		n, err := e.c.GetMessageCount(e.ctx(), janeAuth("jane-secret-1"), "INBOX")
		e.must(err, "patient GetMessageCount")
		wantN(t, "patient INBOX", n, 0)
		e.send(ctAlice, directapi.Message{Sender: ctAlice, Subject: "welcome", Body: "hi",
			Recipients: []directapi.Recipient{{Email: "jane.doe@" + ctDomain, Type: directapi.TO}}})
		n, err = e.c.GetMessageCount(e.ctx(), janeAuth("jane-secret-1"), "INBOX")
		e.must(err, "patient GetMessageCount")
		wantN(t, "patient INBOX after a send", n, 1)
		// Without a username one is derived from the name.
		resp2, err := e.c.ProvisionIDProofedPatient(e.ctx(), s, ctDomain, directapi.IDProofedIndividualRESTful{
			IDProofedIndividual: directapi.IDProofedIndividual{FirstName: "Max", LastName: "Power", SSN4: "9876", DOB: "03/07/1975"}})
		e.must(err, "provision without username")
		if len(resp2.Users) != 1 || resp2.Users[0].Username == "" {
			t.Errorf("derived user %+v", resp2.Users)
		}

		// Failures.
		_, err = e.c.ProvisionIDProofedPatient(e.ctx(), "0123456789abcdef0123456789abcdef", ctDomain, directapi.IDProofedIndividualRESTful{IDProofedIndividual: jane})
		wantRegCode(t, err, "011")
		_, err = e.c.ProvisionIDProofedPatient(e.ctx(), s, "other.example", directapi.IDProofedIndividualRESTful{IDProofedIndividual: jane, DirectUsername: "jd2"})
		wantRegCode(t, err, "208")
		missing := jane
		missing.DOB = ""
		_, err = e.c.ProvisionIDProofedPatient(e.ctx(), s, ctDomain, directapi.IDProofedIndividualRESTful{IDProofedIndividual: missing, DirectUsername: "jd3"})
		wantRegCode(t, err, "010")
		_, err = e.c.ProvisionIDProofedPatient(e.ctx(), s, ctDomain, directapi.IDProofedIndividualRESTful{IDProofedIndividual: jane, DirectUsername: "jane.doe", DirectPassword: "another-pw-1"})
		wantRegCode(t, err, "002") // address taken
		badSSN := jane
		badSSN.SSN4 = "12a4"
		_, err = e.c.ProvisionIDProofedPatient(e.ctx(), s, ctDomain, directapi.IDProofedIndividualRESTful{IDProofedIndividual: badSSN, DirectUsername: "jd4"})
		wantRegCode(t, err, "205")
		// The taken address kept its password.
		_, err = e.c.GetMessageCount(e.ctx(), janeAuth("jane-secret-1"), "INBOX")
		e.must(err, "patient still logs in")
		_, err = e.c.GetMessageCount(e.ctx(), janeAuth("another-pw-1"), "INBOX")
		wantAuthFailure(t, err)

		// The session expires 10 minutes after login.
		e.clock.Advance(10 * time.Minute)
		_, err = e.c.ProvisionIDProofedPatient(e.ctx(), s, ctDomain, directapi.IDProofedIndividualRESTful{IDProofedIndividual: jane, DirectUsername: "jd5", DirectPassword: "jd5-secret-1"})
		wantRegCode(t, err, "011")
		wantAuthFailure(t, err)
		_, err = e.c.GetMessageCount(e.ctx(), directapi.Authentication{Username: "jd5@" + ctDomain, Password: "jd5-secret-1"}, "INBOX")
		wantAuthFailure(t, err) // nothing was provisioned
	})

	t.Run("GetPatientAddressByMeta", func(t *testing.T) {
		t.Parallel()
		e := newCtEnv(t)
		s := ctLogin(e)
		provisionJane(e, s)
		users, err := e.c.GetPatientAddressByMeta(e.ctx(), s, ctDomain, jane)
		e.must(err, "GetPatientAddressByMeta")
		if len(users) != 1 || users[0].Username != "jane.doe" || users[0].UserStateType != directapi.UserStateActivated {
			t.Errorf("users %+v", users)
		}
		// Another date format and other letter case name the same patient.
		alt := directapi.IDProofedIndividual{FirstName: "JANE", LastName: "doe", SSN4: "1234", DOB: "19800307"}
		users, err = e.c.GetPatientAddressByMeta(e.ctx(), s, ctDomain, alt)
		e.must(err, "GetPatientAddressByMeta alt")
		wantN(t, "matches in another form", len(users), 1)
		nobody := jane
		nobody.SSN4 = "0000"
		users, err = e.c.GetPatientAddressByMeta(e.ctx(), s, ctDomain, nobody)
		e.must(err, "GetPatientAddressByMeta no match")
		wantN(t, "matches for nobody", len(users), 0)

		_, err = e.c.GetPatientAddressByMeta(e.ctx(), s, "other.example", jane)
		wantRegCode(t, err, "208")
		noLast := jane
		noLast.LastName = ""
		_, err = e.c.GetPatientAddressByMeta(e.ctx(), s, ctDomain, noLast)
		wantRegCode(t, err, "010")
		e.clock.Advance(10 * time.Minute)
		_, err = e.c.GetPatientAddressByMeta(e.ctx(), s, ctDomain, jane)
		wantRegCode(t, err, "011")
	})

	t.Run("GetPatientAddressByUsername", func(t *testing.T) {
		t.Parallel()
		e := newCtEnv(t)
		s := ctLogin(e)
		provisionJane(e, s)
		users, err := e.c.GetPatientAddressByUsername(e.ctx(), s, ctDomain, "jane.doe")
		e.must(err, "GetPatientAddressByUsername")
		if len(users) != 1 || users[0].Username != "jane.doe" || users[0].FirstName != "Jane" {
			t.Errorf("users %+v", users)
		}
		_, err = e.c.GetPatientAddressByUsername(e.ctx(), s, ctDomain, "no.such.user")
		wantRegCode(t, err, "210")
		_, err = e.c.GetPatientAddressByUsername(e.ctx(), s, "other.example", "jane.doe")
		wantRegCode(t, err, "208")
		e.clock.Advance(9*time.Minute + 59*time.Second)
		_, err = e.c.GetPatientAddressByUsername(e.ctx(), s, ctDomain, "jane.doe")
		e.must(err, "just before expiry")
		e.clock.Advance(time.Second)
		_, err = e.c.GetPatientAddressByUsername(e.ctx(), s, ctDomain, "jane.doe")
		wantRegCode(t, err, "011")
	})

	t.Run("SetPatientsPasswords", func(t *testing.T) {
		t.Parallel()
		e := newCtEnv(t)
		s := ctLogin(e)
		provisionJane(e, s)
		e.must(e.c.SetPatientsPasswords(e.ctx(), s, ctDomain, []directapi.UserPassword{{Username: "jane.doe", Password: "jane-secret-2"}}), "SetPatientsPasswords")
		_, err := e.c.GetMessageCount(e.ctx(), janeAuth("jane-secret-2"), "INBOX")
		e.must(err, "new password")
		_, err = e.c.GetMessageCount(e.ctx(), janeAuth("jane-secret-1"), "INBOX")
		wantAuthFailure(t, err)

		// All or nothing: one unknown user, and jane's password stays.
		err = e.c.SetPatientsPasswords(e.ctx(), s, ctDomain, []directapi.UserPassword{
			{Username: "jane.doe", Password: "jane-secret-3"}, {Username: "ghost", Password: "ghost-secret-1"}})
		wantRegCode(t, err, "210")
		err = e.c.SetPatientsPasswords(e.ctx(), s, ctDomain, nil)
		wantRegCode(t, err, "010")
		err = e.c.SetPatientsPasswords(e.ctx(), s, ctDomain, []directapi.UserPassword{{Username: "jane.doe"}})
		wantRegCode(t, err, "010")
		err = e.c.SetPatientsPasswords(e.ctx(), s, "other.example", []directapi.UserPassword{{Username: "jane.doe", Password: "jane-secret-3"}})
		wantRegCode(t, err, "208")
		_, err = e.c.GetMessageCount(e.ctx(), janeAuth("jane-secret-2"), "INBOX")
		e.must(err, "password unchanged by failures")
		e.clock.Advance(10 * time.Minute)
		err = e.c.SetPatientsPasswords(e.ctx(), s, ctDomain, []directapi.UserPassword{{Username: "jane.doe", Password: "jane-secret-3"}})
		wantRegCode(t, err, "011")
		_, err = e.c.GetMessageCount(e.ctx(), janeAuth("jane-secret-2"), "INBOX")
		e.must(err, "password unchanged by an expired session")
	})

	t.Run("Registrar", func(t *testing.T) {
		t.Parallel()
		e := newCtEnv(t)
		r := e.c.NewRegistrar(ctReseller, directapi.Secret(ctPasswords[ctReseller]))
		resp, err := r.ProvisionIDProofedPatient(e.ctx(), ctDomain, directapi.IDProofedIndividualRESTful{
			IDProofedIndividual: jane, DirectUsername: "jane.doe", DirectPassword: "jane-secret-1"})
		e.must(err, "Registrar provision")
		if len(resp.Users) != 1 || resp.Users[0].Username != "jane.doe" {
			t.Fatalf("users %+v", resp.Users)
		}
		n, err := e.c.GetMessageCount(e.ctx(), janeAuth("jane-secret-1"), "INBOX")
		e.must(err, "provisioned patient on the messaging API")
		wantN(t, "patient INBOX", n, 0)

		users, err := r.GetPatientAddressByMeta(e.ctx(), ctDomain, jane)
		e.must(err, "Registrar by meta")
		wantN(t, "by meta", len(users), 1)
		wantN(t, "logins so far (session reused)", e.srv.Calls("Login"), 1)

		// Past 9 minutes the Registrar renews before the 10 minutes run out.
		e.clock.Advance(9*time.Minute + time.Second)
		users, err = r.GetPatientAddressByUsername(e.ctx(), ctDomain, "jane.doe")
		e.must(err, "Registrar by username after 9 minutes")
		wantN(t, "by username", len(users), 1)
		wantN(t, "logins after 9 minutes", e.srv.Calls("Login"), 2)
		wantN(t, "no call was refused", e.srv.Calls("GetPatientAddressByUsername"), 1)

		e.must(r.SetPatientsPasswords(e.ctx(), ctDomain, []directapi.UserPassword{{Username: "jane.doe", Password: "jane-secret-2"}}), "Registrar set passwords")
		_, err = e.c.GetMessageCount(e.ctx(), janeAuth("jane-secret-2"), "INBOX")
		e.must(err, "password set through the Registrar")
		wantN(t, "logins in the end", e.srv.Calls("Login"), 2)

		// Registrar errors other than 011 are passed on, without a new login.
		_, err = r.GetPatientAddressByUsername(e.ctx(), ctDomain, "ghost")
		wantRegCode(t, err, "210")
		wantN(t, "logins after a 210", e.srv.Calls("Login"), 2)
		// Bad account credentials: 011 from login, no loop.
		bad := e.c.NewRegistrar(ctReseller, "wrong")
		_, err = bad.GetPatientAddressByUsername(e.ctx(), ctDomain, "jane.doe")
		wantRegCode(t, err, "011")
		wantN(t, "logins after a bad account", e.srv.Calls("Login"), 3)
	})

	t.Run("RegistrarAfterProviderRestart", testRegistrarAfterRestart)
}

// swapHandler lets a test replace the server behind an httptest URL.
type swapHandler struct{ h atomic.Pointer[http.Handler] }

func (s *swapHandler) set(h http.Handler) { s.h.Store(&h) }

func (s *swapHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	(*s.h.Load()).ServeHTTP(w, r)
}

// testRegistrarAfterRestart: the provider forgets its sessions (a new
// sandbox Server on the same data directory, behind the same URL) while the
// Registrar still thinks its session fresh. It gets "011", logs in again
// and the call succeeds.
func testRegistrarAfterRestart(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	clock := newTestClock()
	opts := sandbox.Options{Dir: dir, Users: ctUsers(), Resellers: ctResellers(), Clock: clock.Now}
	srv1, err := sandbox.Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	var sw swapHandler
	sw.set(srv1)
	ts := httptest.NewServer(&sw)
	defer ts.Close()
	c, err := restclient.New(restclient.Options{BaseURL: ts.URL, RateLimit: -1, Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	r := c.NewRegistrar(ctReseller, directapi.Secret(ctPasswords[ctReseller]))
	if _, err := r.ProvisionIDProofedPatient(ctx, ctDomain, directapi.IDProofedIndividualRESTful{
		IDProofedIndividual: jane, DirectUsername: "jane.doe", DirectPassword: "jane-secret-1"}); err != nil {
		t.Fatal(err)
	}
	wantN(t, "logins on the first server", srv1.Calls("Login"), 1)

	// Restart: same data, no sessions.
	if err := srv1.Close(); err != nil {
		t.Fatal(err)
	}
	srv2, err := sandbox.Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	defer srv2.Close()
	sw.set(srv2)

	clock.Advance(time.Minute) // the Registrar's session is still fresh to it
	users, err := r.GetPatientAddressByUsername(ctx, ctDomain, "jane.doe")
	if err != nil {
		t.Fatalf("Registrar after restart: %v", err)
	}
	if len(users) != 1 || users[0].Username != "jane.doe" {
		t.Errorf("users %+v", users)
	}
	wantN(t, "calls on the new server (011, then success)", srv2.Calls("GetPatientAddressByUsername"), 2)
	wantN(t, "logins on the new server", srv2.Calls("Login"), 1)
	// The fresh session is kept.
	if _, err := r.GetPatientAddressByMeta(ctx, ctDomain, jane); err != nil {
		t.Fatal(err)
	}
	wantN(t, "logins on the new server after another call", srv2.Calls("Login"), 1)
	// Provisioned data survived the restart: the patient logs in.
	if _, err := c.GetMessageCount(ctx, janeAuth("jane-secret-1"), "INBOX"); err != nil {
		t.Fatalf("patient after restart: %v", err)
	}
}
