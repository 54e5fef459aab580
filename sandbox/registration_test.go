package sandbox_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/directbridge/directbridge/sandbox"
)

// These tests drive the registration service over real HTTP with bodies
// written by hand from registration-rest.md, not through restclient, so
// they check the wire contract itself: paths, field names and codes.

const (
	regPath = "/DirectRegistrationRESTful/rest/Patient"
	msgPath = "/message-rest/api/message"
	domain  = "direct.example"
)

// fakeClock is the sandbox clock the tests move by hand. The server reads
// it from its handler goroutines, hence the mutex.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

type regEnv struct {
	t     *testing.T
	url   string // server base URL
	clock *fakeClock
}

// newRegEnv starts a sandbox with one reseller and one seeded mailbox that
// belongs to no patient, on a clock stopped at start.
func newRegEnv(t *testing.T, start time.Time) *regEnv {
	t.Helper()
	clock := &fakeClock{t: start}
	s, err := sandbox.Open(sandbox.Options{
		Resellers: []sandbox.Account{{Name: "reseller", Password: "reseller-pass"}},
		Users:     []sandbox.Account{{Name: "plain@" + domain, Password: "plain-pass"}},
		Clock:     clock.Now,
	})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	ts := httptest.NewServer(s)
	t.Cleanup(func() {
		ts.Close()
		s.Close()
	})
	return &regEnv{t: t, url: ts.URL, clock: clock}
}

var defaultStart = time.Date(2025, time.March, 10, 15, 30, 0, 0, time.UTC)

// do sends one request and returns the HTTP status and the raw body.
func (e *regEnv) do(method, path, body string) (int, []byte) {
	e.t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, e.url+path, rd)
	if err != nil {
		e.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		e.t.Fatal(err)
	}
	return resp.StatusCode, raw
}

// reg calls a registration operation and decodes the JSON answer.
func (e *regEnv) reg(method, path, body string) (int, map[string]any, []byte) {
	e.t.Helper()
	status, raw := e.do(method, regPath+path, body)
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		e.t.Fatalf("%s %s: answer is not a JSON object: %v: %s", method, path, err, raw)
	}
	return status, m, raw
}

// wantCode checks the envelope: code, success and, on failure, an
// errorMessage that contains each of the texts given.
func wantCode(t *testing.T, m map[string]any, raw []byte, code string, texts ...string) {
	t.Helper()
	if m["code"] != code {
		t.Fatalf("code = %v, want %q; answer %s", m["code"], code, raw)
	}
	if m["success"] != (code == "000") {
		t.Fatalf("success = %v with code %s; answer %s", m["success"], code, raw)
	}
	msg, _ := m["errorMessage"].(string)
	for _, s := range texts {
		if !strings.Contains(msg, s) {
			t.Fatalf("errorMessage %q does not contain %q", msg, s)
		}
	}
}

func (e *regEnv) login() string {
	e.t.Helper()
	status, m, raw := e.reg("POST", "/login", `{"username":"reseller","password":"reseller-pass"}`)
	if status != http.StatusOK {
		e.t.Fatalf("login status %d: %s", status, raw)
	}
	wantCode(e.t, m, raw, "000")
	id, _ := m["sessionId"].(string)
	if !regexp.MustCompile(`^[0-9a-f]{32}$`).MatchString(id) {
		e.t.Fatalf("sessionId %q is not 32 hex characters", id)
	}
	return id
}

func (e *regEnv) provision(session, body string) (int, map[string]any, []byte) {
	e.t.Helper()
	return e.reg("POST", "/ProvisionIDProofedPatient/"+session+"/"+domain, body)
}

// mustProvision provisions and returns the Direct address.
func (e *regEnv) mustProvision(session, body string) string {
	e.t.Helper()
	_, m, raw := e.provision(session, body)
	wantCode(e.t, m, raw, "000")
	users := m["users"].([]any)
	return users[0].(map[string]any)["email"].(string)
}

// canAuthenticate asks the messaging service whether addr/pw log in.
func (e *regEnv) canAuthenticate(addr, pw string) bool {
	e.t.Helper()
	body, _ := json.Marshal(map[string]string{"username": addr, "password": pw})
	status, raw := e.do("POST", msgPath+"/GetMessageCount/INBOX", string(body))
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		e.t.Fatalf("GetMessageCount: status %d, answer is not JSON: %s", status, raw)
	}
	if m["success"] == true {
		return true
	}
	if code, _ := m["code"].(float64); code != 1 {
		e.t.Fatalf("GetMessageCount failed with code %v, want 1 (authentication): %s", m["code"], raw)
	}
	return false
}

// field walks a decoded JSON value along a path of object keys and array
// indexes, failing the test when a step is missing.
func field(t *testing.T, v any, path ...any) any {
	t.Helper()
	for i, step := range path {
		switch k := step.(type) {
		case string:
			obj, ok := v.(map[string]any)
			if !ok {
				t.Fatalf("%v: not an object at %v", path, path[:i])
			}
			if v, ok = obj[k]; !ok {
				t.Fatalf("field %v missing", path[:i+1])
			}
		case int:
			arr, ok := v.([]any)
			if !ok || k >= len(arr) {
				t.Fatalf("%v: no element %d at %v", path, k, path[:i])
			}
			v = arr[k]
		}
	}
	return v
}

const janeBody = `{"firstName":"Jane","lastName":"Doe","ssn4":"1234","dob":"1980-03-07",
	"directUsername":"jane.doe","directPassword":"Secret-pass-1"}`

func TestLogin(t *testing.T) {
	t.Parallel()
	e := newRegEnv(t, defaultStart)
	first, second := e.login(), e.login()
	if first == second {
		t.Fatal("two logins returned the same sessionId")
	}
	for _, tc := range []struct {
		name, body, code string
		status           int
	}{
		{"wrong password", `{"username":"reseller","password":"nope"}`, "011", 200},
		{"unknown user", `{"username":"someone","password":"reseller-pass"}`, "011", 200},
		{"mailbox user is no reseller", `{"username":"plain@direct.example","password":"plain-pass"}`, "011", 200},
		{"missing username", `{"password":"reseller-pass"}`, "010", 200},
		{"missing password", `{"username":"reseller"}`, "010", 200},
		{"empty object", `{}`, "010", 200},
		{"malformed JSON", `{"username":`, "010", 400},
		{"no body", ``, "010", 400},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, m, raw := e.reg("POST", "/login", tc.body)
			if status != tc.status {
				t.Errorf("HTTP status %d, want %d", status, tc.status)
			}
			wantCode(t, m, raw, tc.code)
			if _, ok := m["sessionId"]; ok && tc.code != "000" {
				t.Errorf("failed login carries a sessionId: %s", raw)
			}
		})
	}
}

func TestSessionExpiresAfterTenMinutes(t *testing.T) {
	t.Parallel()
	e := newRegEnv(t, defaultStart)
	session := e.login()
	lookup := func() (map[string]any, []byte) {
		_, m, raw := e.reg("GET", "/GetPatientAddressByUsername/"+session+"/"+domain+"/plain", "")
		return m, raw
	}
	e.clock.Advance(10*time.Minute - time.Second)
	m, raw := lookup()
	wantCode(t, m, raw, "000")

	e.clock.Advance(time.Second) // exactly 10 minutes after issue
	m, raw = lookup()
	wantCode(t, m, raw, "011", "session")

	// The expired session stays invalid even if the clock went back.
	e.clock.Advance(-5 * time.Minute)
	m, raw = lookup()
	wantCode(t, m, raw, "011")

	// A new login gives a working session.
	session = e.login()
	m, raw = lookup()
	wantCode(t, m, raw, "000")
}

func TestProvisionResponse(t *testing.T) {
	t.Parallel()
	e := newRegEnv(t, defaultStart)
	session := e.login()
	status, m, raw := e.provision(session, janeBody)
	if status != http.StatusOK {
		t.Fatalf("status %d: %s", status, raw)
	}
	wantCode(t, m, raw, "000")
	if _, ok := m["errorMessage"]; ok {
		t.Errorf("success carries errorMessage: %s", raw)
	}
	if bytes.Contains(raw, []byte("Secret-pass-1")) || bytes.Contains(bytes.ToLower(raw), []byte("password")) {
		t.Errorf("response carries a password: %s", raw)
	}

	users := field(t, m, "users").([]any)
	if len(users) != 1 {
		t.Fatalf("users has %d entries, want 1", len(users))
	}
	for key, want := range map[string]any{
		"UserStateType": "activated",
		"username":      "jane.doe",
		"userType":      "SMTP",
		"firstName":     "Jane",
		"lastName":      "Doe",
		"email":         "jane.doe@direct.example",
	} {
		if got := field(t, m, "users", 0, key); got != want {
			t.Errorf("users[0].%s = %v, want %v", key, got, want)
		}
	}

	pc := field(t, m, "paymentConfirmation")
	if id, _ := field(t, pc, "orderId").(float64); id < 1 {
		t.Errorf("orderId = %v", field(t, pc, "orderId"))
	}
	if got := field(t, pc, "orderTime"); got != float64(defaultStart.UnixMilli()) {
		t.Errorf("orderTime = %v, want %d (epoch milliseconds of the sandbox clock)", got, defaultStart.UnixMilli())
	}
	if got := field(t, pc, "amount"); got != 12.0 {
		t.Errorf("amount = %v, want 12", got)
	}
	if d, _ := field(t, pc, "detail").(string); d == "" {
		t.Error("detail is empty")
	}
	if n := len(field(t, pc, "products").([]any)); n != 1 {
		t.Fatalf("%d products, want 1", n)
	}
	for key, want := range map[string]any{
		"name":       "Patient Direct address",
		"quantity":   1.0,
		"offerPrice": 12.0,
		"salePrice":  12.0, // 2025-03-10 to 2026-03-10 is 365 days
		"amount":     12.0,
		"startDate":  "2025-03-10",
		"expireDate": "2026-03-10",
	} {
		if got := field(t, pc, "products", 0, key); got != want {
			t.Errorf("products[0].%s = %v, want %v", key, got, want)
		}
	}

	// The new patient logs in on the messaging service.
	if !e.canAuthenticate("jane.doe@direct.example", "Secret-pass-1") {
		t.Error("provisioned patient cannot authenticate on the messaging API")
	}
	if e.canAuthenticate("jane.doe@direct.example", "wrong-password") {
		t.Error("wrong password authenticates")
	}

	// A second order gets a new order number.
	_, m2, raw2 := e.provision(session, `{"firstName":"John","lastName":"Roe","ssn4":"9876","dob":"19700101"}`)
	wantCode(t, m2, raw2, "000")
	if a, b := field(t, m, "paymentConfirmation", "orderId"), field(t, m2, "paymentConfirmation", "orderId"); a == b {
		t.Errorf("two orders share orderId %v", a)
	}
}

func TestProvisionSalePriceOverLeapDay(t *testing.T) {
	t.Parallel()
	// 2027-06-01 to 2028-06-01 spans 29 February 2028: 366 days.
	e := newRegEnv(t, time.Date(2027, time.June, 1, 8, 0, 0, 0, time.UTC))
	_, m, raw := e.provision(e.login(), janeBody)
	wantCode(t, m, raw, "000")
	if got := field(t, m, "paymentConfirmation", "products", 0, "salePrice"); got != 12.03 {
		t.Errorf("salePrice = %v, want 12.03 (12 * 366 / 365)", got)
	}
	if got := field(t, m, "paymentConfirmation", "products", 0, "expireDate"); got != "2028-06-01" {
		t.Errorf("expireDate = %v", got)
	}
}

func TestProvisionDerivedUsernameAndGeneratedPassword(t *testing.T) {
	t.Parallel()
	e := newRegEnv(t, defaultStart)
	session := e.login()
	body := `{"firstName":"Mary-Ann","lastName":"O'Brien","ssn4":"1111","dob":"1990-01-02"}`
	if got := e.mustProvision(session, body); got != "mary-ann.obrien@direct.example" {
		t.Errorf("derived address %q", got)
	}
	// Same patient again: a second address with a numeric suffix.
	if got := e.mustProvision(session, body); got != "mary-ann.obrien2@direct.example" {
		t.Errorf("second derived address %q", got)
	}
	// Another patient with the same name gets the next free one.
	other := `{"firstName":"mary-ann","lastName":"o'brien","ssn4":"2222","dob":"1991-01-02"}`
	if got := e.mustProvision(session, other); got != "mary-ann.obrien3@direct.example" {
		t.Errorf("third derived address %q", got)
	}
	// Names with nothing usable still give an address.
	if got := e.mustProvision(session, `{"firstName":"Zoë","lastName":"Ångström","ssn4":"3333","dob":"1992-01-02"}`); got != "zo.ngstrm@direct.example" {
		t.Errorf("derived address from non-ASCII names %q", got)
	}
	if got := e.mustProvision(session, `{"firstName":"李","lastName":"王","ssn4":"4444","dob":"1993-01-02"}`); got != "patient@direct.example" {
		t.Errorf("derived address from non-Latin names %q", got)
	}

	// The generated password is unknown: the patient needs
	// SetPatientsPasswords before logging in.
	addr := "mary-ann.obrien@direct.example"
	_, m, raw := e.reg("POST", "/SetPatientsPasswords/"+session+"/"+domain,
		`[{"username":"mary-ann.obrien","password":"chosen-pass"}]`)
	wantCode(t, m, raw, "000")
	if !e.canAuthenticate(addr, "chosen-pass") {
		t.Error("patient cannot authenticate after SetPatientsPasswords")
	}
}

func TestProvisionErrors(t *testing.T) {
	t.Parallel()
	e := newRegEnv(t, defaultStart)
	session := e.login()
	e.mustProvision(session, janeBody)

	for _, tc := range []struct {
		name, session, domain, body string
		code                        string
		status                      int
		texts                       []string
	}{
		{name: "ssn4 not digits", body: `{"firstName":"A","lastName":"B","ssn4":"12a4","dob":"1980-01-01"}`, code: "205", texts: []string{"ssn4"}},
		{name: "ssn4 too short", body: `{"firstName":"A","lastName":"B","ssn4":"123","dob":"1980-01-01"}`, code: "205", texts: []string{"ssn4"}},
		{name: "ssn4 too long", body: `{"firstName":"A","lastName":"B","ssn4":"12345","dob":"1980-01-01"}`, code: "205"},
		{name: "dob no such month", body: `{"firstName":"A","lastName":"B","ssn4":"1234","dob":"1980-13-01"}`, code: "205", texts: []string{"dob"}},
		{name: "dob words", body: `{"firstName":"A","lastName":"B","ssn4":"1234","dob":"March 7th 1980"}`, code: "205", texts: []string{"dob"}},
		{name: "dob in the future", body: `{"firstName":"A","lastName":"B","ssn4":"1234","dob":"2030-01-01"}`, code: "205", texts: []string{"dob"}},
		{name: "unknown id", body: `{"id":999,"directUsername":"x1"}`, code: "205", texts: []string{"999"}},
		{name: "duplicate username", body: `{"firstName":"A","lastName":"B","ssn4":"1234","dob":"1980-01-01","directUsername":"jane.doe"}`,
			code: "002", texts: []string{"jane.doe@direct.example", "already exists"}},
		{name: "duplicate username other case", body: `{"firstName":"A","lastName":"B","ssn4":"1234","dob":"1980-01-01","directUsername":"Jane.Doe"}`, code: "002"},
		{name: "username starts with dot", body: `{"firstName":"A","lastName":"B","ssn4":"1234","dob":"1980-01-01","directUsername":".ab"}`, code: "002"},
		{name: "username with space", body: `{"firstName":"A","lastName":"B","ssn4":"1234","dob":"1980-01-01","directUsername":"a b"}`, code: "002"},
		{name: "username with at sign", body: `{"firstName":"A","lastName":"B","ssn4":"1234","dob":"1980-01-01","directUsername":"a@b"}`, code: "002"},
		{name: "username with double dot", body: `{"firstName":"A","lastName":"B","ssn4":"1234","dob":"1980-01-01","directUsername":"a..b"}`, code: "002"},
		{name: "username too long", body: `{"firstName":"A","lastName":"B","ssn4":"1234","dob":"1980-01-01","directUsername":"` + strings.Repeat("a", 65) + `"}`, code: "002"},
		{name: "short password", body: `{"firstName":"A","lastName":"B","ssn4":"1234","dob":"1980-01-01","directPassword":"short"}`, code: "010", texts: []string{"8"}},
		{name: "missing firstName", body: `{"lastName":"B","ssn4":"1234","dob":"1980-01-01"}`, code: "010", texts: []string{"firstName"}},
		{name: "missing lastName", body: `{"firstName":"A","ssn4":"1234","dob":"1980-01-01"}`, code: "010", texts: []string{"lastName"}},
		{name: "missing ssn4", body: `{"firstName":"A","lastName":"B","dob":"1980-01-01"}`, code: "010", texts: []string{"ssn4"}},
		{name: "missing dob", body: `{"firstName":"A","lastName":"B","ssn4":"1234"}`, code: "010", texts: []string{"dob"}},
		{name: "blank names", body: `{"firstName":"  ","lastName":"B","ssn4":"1234","dob":"1980-01-01"}`, code: "010"},
		{name: "empty object", body: `{}`, code: "010"},
		{name: "malformed JSON", body: `{"firstName":"A",`, code: "010", status: 400},
		{name: "wrong JSON type", body: `{"ssn4":1234}`, code: "010", status: 400},
		{name: "no body", body: ``, code: "010", status: 400},
		{name: "unknown domain", domain: "other.example", body: janeBody, code: "208", texts: []string{"other.example"}},
		{name: "bad session", session: "0123456789abcdef0123456789abcdef", body: janeBody, code: "011"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sess, dom := session, domain
			if tc.session != "" {
				sess = tc.session
			}
			if tc.domain != "" {
				dom = tc.domain
			}
			status, m, raw := e.reg("POST", "/ProvisionIDProofedPatient/"+sess+"/"+dom, tc.body)
			want := tc.status
			if want == 0 {
				want = http.StatusOK
			}
			if status != want {
				t.Errorf("HTTP status %d, want %d", status, want)
			}
			wantCode(t, m, raw, tc.code, tc.texts...)
			if _, ok := m["users"]; ok {
				t.Errorf("failure carries users: %s", raw)
			}
		})
	}

	// None of the failures created anything: the only patient address is
	// still Jane's.
	_, m, raw := e.reg("POST", "/GetPatientAddressByMeta/"+session+"/"+domain,
		`{"firstName":"A","lastName":"B","ssn4":"1234","dob":"1980-01-01"}`)
	wantCode(t, m, raw, "000")
	if n := len(field(t, m, "patient").([]any)); n != 0 {
		t.Errorf("failed provisioning left %d addresses: %s", n, raw)
	}
}

func TestProvisionByIDAndSeveralAddresses(t *testing.T) {
	t.Parallel()
	e := newRegEnv(t, defaultStart)
	session := e.login()
	e.mustProvision(session, janeBody)
	// The document gives no way to learn a patient's id; in a fresh
	// sandbox the first identity proofing record has id 1.
	if got := e.mustProvision(session, `{"id":1,"directUsername":"jane.work","directPassword":"Other-pass-2"}`); got != "jane.work@direct.example" {
		t.Fatalf("address %q", got)
	}
	// The same identity (other case, other dob format) reuses the patient.
	e.mustProvision(session, `{"firstName":"JANE","lastName":"doe","ssn4":"1234","dob":"03/07/1980","directUsername":"jane3"}`)

	for _, body := range []string{
		`{"id":1}`,
		`{"firstName":"jane","lastName":"DOE","ssn4":"1234","dob":"19800307"}`,
	} {
		_, m, raw := e.reg("POST", "/GetPatientAddressByMeta/"+session+"/"+domain, body)
		wantCode(t, m, raw, "000")
		var names []string
		for _, p := range field(t, m, "patient").([]any) {
			names = append(names, p.(map[string]any)["username"].(string))
		}
		if got := strings.Join(names, ","); got != "jane.doe,jane.work,jane3" {
			t.Errorf("%s: addresses %s, want jane.doe,jane.work,jane3", body, got)
		}
	}
	if !e.canAuthenticate("jane.work@direct.example", "Other-pass-2") {
		t.Error("second address cannot authenticate")
	}
}

func TestAddressByMeta(t *testing.T) {
	t.Parallel()
	e := newRegEnv(t, defaultStart)
	session := e.login()
	e.mustProvision(session, janeBody)
	meta := func(body string) (int, map[string]any, []byte) {
		return e.reg("POST", "/GetPatientAddressByMeta/"+session+"/"+domain, body)
	}

	t.Run("match", func(t *testing.T) {
		_, m, raw := meta(`{"firstName":"jane","lastName":"doe","ssn4":"1234","dob":"03/07/1980"}`)
		wantCode(t, m, raw, "000")
		ps := field(t, m, "patient").([]any)
		if len(ps) != 1 {
			t.Fatalf("%d addresses, want 1: %s", len(ps), raw)
		}
		for key, want := range map[string]any{
			"username": "jane.doe", "email": "jane.doe@direct.example", "firstName": "Jane",
			"lastName": "Doe", "userType": "SMTP", "UserStateType": "activated",
		} {
			if got := field(t, ps[0], key); got != want {
				t.Errorf("patient[0].%s = %v, want %v", key, got, want)
			}
		}
	})
	for _, tc := range []struct{ name, body string }{
		{"other ssn4", `{"firstName":"Jane","lastName":"Doe","ssn4":"4321","dob":"1980-03-07"}`},
		{"other dob", `{"firstName":"Jane","lastName":"Doe","ssn4":"1234","dob":"1980-03-08"}`},
		{"other name", `{"firstName":"Janet","lastName":"Doe","ssn4":"1234","dob":"1980-03-07"}`},
		{"unknown id", `{"id":42}`},
	} {
		t.Run("no match/"+tc.name, func(t *testing.T) {
			_, m, raw := meta(tc.body)
			wantCode(t, m, raw, "000")
			if !bytes.Contains(raw, []byte(`"patient":[]`)) {
				t.Errorf("no match should give an empty patient array: %s", raw)
			}
		})
	}
	t.Run("missing fields", func(t *testing.T) {
		for _, body := range []string{`{}`, `{"firstName":"Jane","lastName":"Doe","ssn4":"1234"}`, `{"firstName":"Jane","ssn4":"1234","dob":"1980-03-07"}`} {
			_, m, raw := meta(body)
			wantCode(t, m, raw, "010")
		}
	})
	t.Run("bad dob", func(t *testing.T) {
		_, m, raw := meta(`{"firstName":"Jane","lastName":"Doe","ssn4":"1234","dob":"7.3.1980"}`)
		wantCode(t, m, raw, "205")
	})
	t.Run("unknown domain", func(t *testing.T) {
		_, m, raw := e.reg("POST", "/GetPatientAddressByMeta/"+session+"/other.example", `{"id":1}`)
		wantCode(t, m, raw, "208", "other.example")
	})
	t.Run("bad session", func(t *testing.T) {
		_, m, raw := e.reg("POST", "/GetPatientAddressByMeta/nope/"+domain, `{"id":1}`)
		wantCode(t, m, raw, "011")
	})
}

func TestAddressByUsername(t *testing.T) {
	t.Parallel()
	e := newRegEnv(t, defaultStart)
	session := e.login()
	e.mustProvision(session, janeBody)
	byName := func(username string) (map[string]any, []byte) {
		_, m, raw := e.reg("GET", "/GetPatientAddressByUsername/"+session+"/"+domain+"/"+username, "")
		return m, raw
	}
	for _, username := range []string{"jane.doe", "Jane.Doe", "jane.doe@direct.example"} {
		m, raw := byName(username)
		wantCode(t, m, raw, "000")
		ps := field(t, m, "patient").([]any)
		if len(ps) != 1 {
			t.Fatalf("%s: %d entries, want 1", username, len(ps))
		}
		for key, want := range map[string]any{"username": "jane.doe", "firstName": "Jane", "UserStateType": "activated", "userType": "SMTP"} {
			if got := field(t, ps[0], key); got != want {
				t.Errorf("%s: patient[0].%s = %v, want %v", username, key, got, want)
			}
		}
	}

	// A mailbox that belongs to no patient is found, with empty names.
	m, raw := byName("plain")
	wantCode(t, m, raw, "000")
	if got := field(t, m, "patient", 0, "firstName"); got != "" {
		t.Errorf("firstName of a mailbox without patient = %v", got)
	}

	m, raw = byName("nobody")
	wantCode(t, m, raw, "210", "nobody@direct.example")
	m, raw = byName("jane.doe@other.example")
	wantCode(t, m, raw, "210", "jane.doe@other.example")

	_, m, raw = e.reg("GET", "/GetPatientAddressByUsername/"+session+"/other.example/jane.doe", "")
	wantCode(t, m, raw, "208", "other.example")
	_, m, raw = e.reg("GET", "/GetPatientAddressByUsername/expired/"+domain+"/jane.doe", "")
	wantCode(t, m, raw, "011")
}

func TestSetPatientsPasswords(t *testing.T) {
	t.Parallel()
	e := newRegEnv(t, defaultStart)
	session := e.login()
	jane := e.mustProvision(session, janeBody)
	john := e.mustProvision(session, `{"firstName":"John","lastName":"Roe","ssn4":"9876","dob":"1970-01-01","directPassword":"john-pass-1"}`)
	set := func(body string) (int, map[string]any, []byte) {
		return e.reg("POST", "/SetPatientsPasswords/"+session+"/"+domain, body)
	}

	status, m, raw := set(`[{"username":"jane.doe","password":"new-jane-pass"},{"username":"` + john + `","password":"new-john-pass"}]`)
	if status != http.StatusOK {
		t.Fatalf("status %d", status)
	}
	wantCode(t, m, raw, "000")
	if e.canAuthenticate(jane, "Secret-pass-1") || e.canAuthenticate(john, "john-pass-1") {
		t.Error("old password still works")
	}
	if !e.canAuthenticate(jane, "new-jane-pass") || !e.canAuthenticate(john, "new-john-pass") {
		t.Error("new password does not work")
	}

	// One unknown user: 210 and nothing changed.
	_, m, raw = set(`[{"username":"jane.doe","password":"third-jane-pass"},{"username":"ghost","password":"ghost-pass-1"}]`)
	wantCode(t, m, raw, "210", "ghost@direct.example")
	if !e.canAuthenticate(jane, "new-jane-pass") || e.canAuthenticate(jane, "third-jane-pass") {
		t.Error("a failed SetPatientsPasswords changed a password")
	}
	// A mailbox that is not a patient's: 013, and nothing changed.
	_, m, raw = set(`[{"username":"jane.doe","password":"third-jane-pass"},{"username":"plain","password":"plain-new-pass"}]`)
	wantCode(t, m, raw, "013", "plain@direct.example")
	if !e.canAuthenticate("plain@"+domain, "plain-pass") || e.canAuthenticate(jane, "third-jane-pass") {
		t.Error("SetPatientsPasswords changed a password it refused")
	}
	// An address of another domain is no mailbox of this one.
	_, m, raw = set(`[{"username":"jane.doe@other.example","password":"third-jane-pass"}]`)
	wantCode(t, m, raw, "210", "jane.doe@other.example")

	for _, tc := range []struct{ name, body, code string }{
		{"empty array", `[]`, "010"},
		{"null", `null`, "010"},
		{"missing username", `[{"password":"long-enough"}]`, "010"},
		{"missing password", `[{"username":"jane.doe"}]`, "010"},
		{"short password", `[{"username":"jane.doe","password":"short"}]`, "010"},
	} {
		_, m, raw := set(tc.body)
		wantCode(t, m, raw, tc.code)
		if !e.canAuthenticate(jane, "new-jane-pass") {
			t.Errorf("%s: password changed", tc.name)
		}
	}
	status, m, raw = set(`{"username":"jane.doe","password":"long-enough"}`)
	if status != http.StatusBadRequest {
		t.Errorf("object instead of array: HTTP status %d, want 400", status)
	}
	wantCode(t, m, raw, "010")

	_, m, raw = e.reg("POST", "/SetPatientsPasswords/"+session+"/other.example", `[{"username":"jane.doe","password":"long-enough"}]`)
	wantCode(t, m, raw, "208")
	_, m, raw = e.reg("POST", "/SetPatientsPasswords/bad/"+domain, `[{"username":"jane.doe","password":"long-enough"}]`)
	wantCode(t, m, raw, "011")
}
