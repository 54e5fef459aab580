package sandbox

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/directbridge/directbridge/internal/sqlstmt"
	"github.com/directbridge/directbridge/upstream/directapi"
)

// This file is the patient registration service (registration-rest.md):
// login, provisioning of patient Direct addresses, the two address
// look-ups and password resets. Where the document says "not shown" the
// sandbox picks a behaviour and says so in the comment of the function
// that implements it.

// sessionLifetime is the documented validity of a sessionId ("it expires
// 10 minutes after it was issued"; Limits 1).
const sessionLifetime = 10 * time.Minute

// minPasswordLen is the shortest password the sandbox accepts for a
// mailbox. The document does not show a password policy ("not shown"); the
// sandbox asks for 8 characters so that a client which sends trivially
// short passwords learns it before a real provider refuses them.
const minPasswordLen = 8

// Product of a provisioning order. The document describes only the shape
// of Product and the sale price rule; the name, description and price are
// the sandbox's own (prices: "not shown").
const (
	productName        = "Patient Direct address"
	productDescription = "hosted Direct address with certificate, 1 year"
	productOfferPrice  = 12.00
	orderDetail        = "sandbox order; nothing is charged"
)

// usernamePattern is what the sandbox accepts as directUsername: the
// document does not show the rules for the local part, so the sandbox
// takes a conservative subset of dot-atom that every mail system accepts.
var usernamePattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)

// dobLayouts are the date-of-birth formats the sandbox accepts. The
// document says the format of dob is "not shown"; the sandbox accepts the
// ISO form, the US form and the compact form, and stores yyyy-MM-dd.
var dobLayouts = []string{"2006-01-02", "01/02/2006", "20060102"}

// session is a registration login. Sessions live only in memory, as a
// provider's would: restarting the sandbox logs every caller out.
type session struct {
	reseller string
	expires  time.Time
}

// handleLogin answers operation 1 (POST /login). It checks the account
// against the resellers table and issues a new random sessionId valid for
// ten minutes of the sandbox clock. Missing fields are code 010, wrong
// credentials 011 ("Failed authentication gives code 011"). An unknown
// username costs the same hashing work as a known one, so timing does not
// reveal which accounts exist.
func (s *Server) handleLogin(ctx context.Context, c *call) (any, error) {
	var req directapi.LoginRequest
	if err := c.decode(&req); err != nil {
		return nil, err
	}
	username := strings.TrimSpace(req.Username)
	password := req.Password.Reveal()
	switch {
	case username == "":
		return nil, regErr(directapi.RegCodeInvalidArgument, "argument missing: username")
	case password == "":
		return nil, regErr(directapi.RegCodeInvalidArgument, "argument missing: password")
	}
	var salt, hash []byte
	err := s.stmts.QueryRow(ctx, `SELECT pw_salt, pw_hash FROM resellers WHERE username = ?`, username).Scan(&salt, &hash)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		passwordMatches(make([]byte, 16), make([]byte, 32), password)
		return nil, regErr(directapi.RegCodeAuthFailed, "authentication failed")
	case err != nil:
		return nil, err
	case !passwordMatches(salt, hash, password):
		return nil, regErr(directapi.RegCodeAuthFailed, "authentication failed")
	}
	id := newSessionID()
	now := s.now()
	s.sessMu.Lock()
	s.purgeSessionsLocked(now)
	s.sessions[id] = session{reseller: username, expires: now.Add(sessionLifetime)}
	s.sessMu.Unlock()
	return directapi.LoginResponseType{ResellerAPIResponseType: regOK(), SessionID: directapi.Secret(id)}, nil
}

// newSessionID returns 128 random bits as 32 hex characters: unguessable,
// and safe in a URL path segment without escaping.
func newSessionID() string {
	b := make([]byte, 16)
	rand.Read(b) // never fails (crypto/rand, Go 1.24+)
	return hex.EncodeToString(b)
}

// purgeSessionsLocked forgets expired sessions, so a long-running sandbox
// does not accumulate them. The caller holds sessMu. Login calls it:
// sessions are only created there, so the map cannot grow without it.
func (s *Server) purgeSessionsLocked(now time.Time) {
	for id, ss := range s.sessions {
		if !now.Before(ss.expires) {
			delete(s.sessions, id)
		}
	}
}

// checkSession validates the {session} path segment of operations 2 to 5
// and returns the reseller it belongs to. An unknown sessionId and one at
// or past its expiry are both code 011 ("Failed authentication gives code
// 011"); the expired session is removed. Whether using a session extends
// its life is "not shown": the sandbox does not extend it, the document
// saying only that it expires 10 minutes after it was issued.
func (s *Server) checkSession(id string) (string, error) {
	now := s.now()
	s.sessMu.Lock()
	defer s.sessMu.Unlock()
	ss, ok := s.sessions[id]
	if ok && !now.Before(ss.expires) {
		delete(s.sessions, id)
		ok = false
	}
	if !ok {
		return "", regErr(directapi.RegCodeAuthFailed, "session expired or invalid")
	}
	return ss.reseller, nil
}

// checkDomain validates the {directDomain} path segment and returns it
// lower-cased. The sandbox is the organization of the domains it hosts
// (its own and those of its mailboxes); any other domain is code 208, "no
// organization found for the domain", with the domain in the text as the
// document requires. Which domains a given reseller may use is "not
// shown": every session may use every hosted domain.
func (s *Server) checkDomain(tx *sqlstmt.Tx, domain string) (string, error) {
	domain = strings.ToLower(strings.TrimSpace(domain))
	if domain != "" {
		ok, err := s.hostsDomain(tx, domain)
		if err != nil {
			return "", err
		}
		if ok {
			return domain, nil
		}
	}
	return "", regErr(directapi.RegCodeNoOrgForDomain, "no organization found for the domain %s", domain)
}

// identity is an identity-proofed individual after validation: trimmed
// names, four-digit ssn4 and dob as yyyy-MM-dd.
type identity struct {
	firstName, lastName, ssn4, dob string
}

// validateIdentity checks the identifying fields of an IDProofedIndividual
// used without id: all four are required ("only if id absent"), so a
// missing one is code 010 naming the field. A present but invalid ssn4 or
// dob is code 205, "failed to validate ID proofed individuals", with the
// reason in the text. The sandbox uses the same rules for provisioning and
// for look-ups, so one malformed value gives one code everywhere.
func (s *Server) validateIdentity(p directapi.IDProofedIndividual) (identity, error) {
	id := identity{
		firstName: strings.TrimSpace(p.FirstName),
		lastName:  strings.TrimSpace(p.LastName),
		ssn4:      strings.TrimSpace(p.SSN4),
	}
	for _, f := range []struct{ name, value string }{
		{"firstName", id.firstName}, {"lastName", id.lastName}, {"ssn4", id.ssn4}, {"dob", strings.TrimSpace(p.DOB)},
	} {
		if f.value == "" {
			return identity{}, regErr(directapi.RegCodeInvalidArgument, "argument missing: %s", f.name)
		}
	}
	if len(id.ssn4) != 4 || !isDigits(id.ssn4) {
		return identity{}, regErr(directapi.RegCodeIDProofingFailed,
			"failed to validate ID proofed individuals: ssn4 must be exactly 4 digits")
	}
	dob, err := s.normDOB(p.DOB)
	if err != nil {
		return identity{}, err
	}
	id.dob = dob
	return id, nil
}

// normDOB parses a date of birth in any accepted layout (dobLayouts) and
// returns it as yyyy-MM-dd, so "1980-03-07", "03/07/1980" and "19800307"
// find the same patient. A date after today (sandbox clock) cannot be a
// date of birth and is refused as well.
func (s *Server) normDOB(v string) (string, error) {
	v = strings.TrimSpace(v)
	for _, layout := range dobLayouts {
		t, err := time.ParseInLocation(layout, v, time.UTC)
		if err != nil {
			continue
		}
		if t.After(s.now()) {
			return "", regErr(directapi.RegCodeIDProofingFailed,
				"failed to validate ID proofed individuals: dob %s is in the future", t.Format("2006-01-02"))
		}
		return t.Format("2006-01-02"), nil
	}
	return "", regErr(directapi.RegCodeIDProofingFailed,
		"failed to validate ID proofed individuals: dob must be yyyy-MM-dd, MM/dd/yyyy or yyyyMMdd")
}

func isDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return s != ""
}

// patientByID loads the identity of an existing patients row; an unknown
// id is code 205, since the id names an identity proofing record.
func patientByID(tx *sqlstmt.Tx, id int64) (identity, error) {
	var p identity
	err := tx.QueryRow(`SELECT first_name, last_name, ssn4, dob FROM patients WHERE id = ?`, id).
		Scan(&p.firstName, &p.lastName, &p.ssn4, &p.dob)
	if errors.Is(err, sql.ErrNoRows) {
		return identity{}, regErr(directapi.RegCodeIDProofingFailed,
			"failed to validate ID proofed individuals: unknown id %d", id)
	}
	return p, err
}

// findPatient returns the id of the patients row with this identity
// (names compared case-insensitively), or 0 when there is none.
func findPatient(tx *sqlstmt.Tx, p identity) (int64, error) {
	var id int64
	err := tx.QueryRow(`SELECT id FROM patients
		WHERE first_name = ? COLLATE NOCASE AND last_name = ? COLLATE NOCASE AND ssn4 = ? AND dob = ?
		ORDER BY id LIMIT 1`, p.firstName, p.lastName, p.ssn4, p.dob).Scan(&id)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, nil
	}
	return id, err
}

// handleProvision answers operation 2 (POST
// /ProvisionIDProofedPatient/{sessionId}/{directDomain}): it creates a
// hosted SMTP Direct address for an identity-proofed patient and an order
// that pays for it, all in one transaction.
//
// The patient is named by id (an existing patients row; unknown is 205) or
// by firstName, lastName, ssn4 and dob (see validateIdentity); when id is
// given the other fields are ignored. The same identity reuses its
// patients row, so one patient may hold several addresses (whether the
// provider allows that is "not shown"; the sandbox does).
//
// Whether directUsername and directPassword are required is "not shown".
// The sandbox derives a missing username from the patient's name
// (first.last, with a numeric suffix when taken) and generates a random
// password when none is given; such a patient can log in only after
// SetPatientsPasswords. A given username must match usernamePattern and
// form a valid address, else code 002; a taken address is 002 too. A
// given password shorter than 8 characters is 010. The new user is
// "activated" (the document shows no transitions, and the sandbox issues
// no certificates to wait for) and of type SMTP.
//
// The response never carries a password. Email of the user is the Direct
// address: the patient's regular email address is not part of the
// request.
func (s *Server) handleProvision(ctx context.Context, c *call) (any, error) {
	reseller, err := s.checkSession(c.param("session"))
	if err != nil {
		return nil, err
	}
	var req directapi.IDProofedIndividualRESTful
	if err := c.decode(&req); err != nil {
		return nil, err
	}
	var resp directapi.AddUsersResponseV2Type
	err = s.tx(ctx, func(tx *sqlstmt.Tx) error {
		domain, err := s.checkDomain(tx, c.param("domain"))
		if err != nil {
			return err
		}
		var who identity
		var patientID int64
		if req.ID != 0 {
			if who, err = patientByID(tx, req.ID); err != nil {
				return err
			}
			patientID = req.ID
		} else if who, err = s.validateIdentity(req.IDProofedIndividual); err != nil {
			return err
		}
		username := strings.TrimSpace(req.DirectUsername)
		if username != "" && !usernamePattern.MatchString(username) {
			return regErr(directapi.RegCodeInvalidUser,
				"invalid user when provisioning: directUsername %q must be 1 to 64 letters, digits, '.', '_' or '-', starting with a letter or digit", username)
		}
		password := req.DirectPassword.Reveal()
		if password != "" && utf8.RuneCountInString(password) < minPasswordLen {
			return regErr(directapi.RegCodeInvalidArgument, "directPassword must have at least %d characters", minPasswordLen)
		}
		if password == "" {
			password = randomPassword()
		}
		var addr string
		if username == "" {
			if addr, err = freeDerivedAddress(tx, who, domain); err != nil {
				return err
			}
		} else {
			if addr, err = normAddress(username + "@" + domain); err != nil {
				return regErr(directapi.RegCodeInvalidUser,
					"invalid user when provisioning: %s@%s is not a valid address", username, domain)
			}
			taken, err := addressExists(tx, addr)
			if err != nil {
				return err
			}
			if taken {
				return regErr(directapi.RegCodeInvalidUser,
					"invalid user when provisioning: address %s already exists", addr)
			}
		}
		if patientID == 0 {
			if patientID, err = findPatient(tx, who); err != nil {
				return err
			}
		}
		if patientID == 0 {
			res, err := tx.Exec(`INSERT INTO patients (first_name, last_name, ssn4, dob) VALUES (?, ?, ?, ?)`,
				who.firstName, who.lastName, who.ssn4, who.dob)
			if err != nil {
				return fmt.Errorf("sandbox: inserting patient: %w", err)
			}
			patientID, _ = res.LastInsertId()
		}
		userID, err := s.createOrResetMailbox(tx, addr, password)
		if err != nil {
			return err
		}
		if _, err := tx.Exec(`UPDATE users SET patient_id = ?, first_name = ?, last_name = ?, state = ?, user_type = ? WHERE id = ?`,
			patientID, who.firstName, who.lastName, string(directapi.UserStateActivated), string(directapi.UserTypeSMTP), userID); err != nil {
			return fmt.Errorf("sandbox: updating user: %w", err)
		}
		now := s.now()
		res, err := tx.Exec(`INSERT INTO orders (reseller, created_at) VALUES (?, ?)`, reseller, now.UnixMilli())
		if err != nil {
			return fmt.Errorf("sandbox: inserting order: %w", err)
		}
		orderID, _ := res.LastInsertId()
		resp.ResellerAPIResponseType = regOK()
		resp.Users = []directapi.DirectUserDetail{userDetail(addr, who.firstName, who.lastName, "",
			string(directapi.UserTypeSMTP), string(directapi.UserStateActivated))}
		resp.PaymentConfirmation = newOrder(int(orderID), now)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return resp, nil
}

// newOrder builds the payment confirmation of one new address. The
// document gives salePrice = offerPrice * (expireDate - today) / one year;
// the sandbox counts one year as 365 days, so an order whose year spans a
// 29 February costs 366/365 of the offer price, and rounds to cents.
// Dates are yyyy-MM-dd in UTC (their format is "not shown").
func newOrder(orderID int, now time.Time) *directapi.PaymentConfirmation {
	today := time.Date(now.Year(), now.Month(), now.Day(), 0, 0, 0, 0, time.UTC)
	expire := today.AddDate(1, 0, 0)
	days := math.Round(expire.Sub(today).Hours() / 24)
	sale := cents(productOfferPrice * days / 365)
	p := directapi.Product{
		Name:        productName,
		Description: productDescription,
		Quantity:    1,
		OfferPrice:  productOfferPrice,
		SalePrice:   sale,
		StartDate:   today.Format("2006-01-02"),
		ExpireDate:  expire.Format("2006-01-02"),
	}
	p.Amount = cents(p.SalePrice * float64(p.Quantity))
	return &directapi.PaymentConfirmation{
		OrderID:   orderID,
		Amount:    p.Amount,
		OrderTime: directapi.NewDate(now),
		Products:  []directapi.Product{p},
		Detail:    orderDetail,
	}
}

// cents rounds an amount to two decimals.
func cents(v float64) float64 { return math.Round(v*100) / 100 }

// randomPassword is the password of a patient provisioned without one:
// 144 random bits, which nobody knows, so the mailbox is unusable until
// SetPatientsPasswords sets a known one.
func randomPassword() string {
	b := make([]byte, 18)
	rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}

// addressExists reports whether a mailbox with this address exists
// (addresses compare case-insensitively).
func addressExists(tx *sqlstmt.Tx, addr string) (bool, error) {
	var n int
	err := tx.QueryRow(`SELECT COUNT(*) FROM users WHERE address = ?`, addr).Scan(&n)
	return n > 0, err
}

// derivedUsername builds a username from the patient's name: first.last
// in lower case, keeping only [a-z0-9._-], without empty dot levels, so
// the result is a valid dot-atom. A name with nothing usable gives
// "patient".
func derivedUsername(first, last string) string {
	clean := func(s string) string {
		var b strings.Builder
		for _, r := range strings.ToLower(s) {
			if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-' {
				b.WriteRune(r)
			}
		}
		return b.String()
	}
	var parts []string
	for _, seg := range strings.Split(clean(first)+"."+clean(last), ".") {
		if seg != "" {
			parts = append(parts, seg)
		}
	}
	notAlnum := func(r rune) bool { return !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9') }
	u := strings.TrimLeftFunc(strings.Join(parts, "."), notAlnum)
	if len(u) > 56 { // room for a numeric suffix within 64 characters
		u = u[:56]
	}
	u = strings.TrimRight(u, ".")
	if !usernamePattern.MatchString(u) {
		u = "patient"
	}
	return u
}

// freeDerivedAddress returns the first free address derivedUsername@domain,
// derivedUsername2@domain, derivedUsername3@domain, ...
func freeDerivedAddress(tx *sqlstmt.Tx, who identity, domain string) (string, error) {
	base := derivedUsername(who.firstName, who.lastName)
	for n := 1; n < 100000; n++ {
		local := base
		if n > 1 {
			local += strconv.Itoa(n)
		}
		addr, err := normAddress(local + "@" + domain)
		if err != nil {
			return "", regErr(directapi.RegCodeInvalidUser,
				"invalid user when provisioning: cannot derive a valid address in %s", domain)
		}
		taken, err := addressExists(tx, addr)
		if err != nil {
			return "", err
		}
		if !taken {
			return addr, nil
		}
	}
	return "", regErr(directapi.RegCodeInvalidUser, "invalid user when provisioning: no free username for %s", base)
}

// userDetail is the DirectUserDetail of a mailbox. Email is the user's
// stored email, or the Direct address when none is stored.
func userDetail(addr, first, last, email, userType, state string) directapi.DirectUserDetail {
	if email == "" {
		email = addr
	}
	return directapi.DirectUserDetail{
		DirectUser: directapi.DirectUser{
			BaseUser: directapi.BaseUser{FirstName: first, LastName: last, Email: email},
			Username: addr[:strings.LastIndexByte(addr, '@')],
			UserType: directapi.DirectUserType(userType),
		},
		UserStateType: directapi.UserStateType(state),
	}
}

// userRow is a mailbox with the columns a DirectUserDetail needs.
type userRow struct {
	id                                           int64
	address, first, last, email, userType, state string
}

func (u userRow) detail() directapi.DirectUserDetail {
	return userDetail(u.address, u.first, u.last, u.email, u.userType, u.state)
}

const userColumns = `u.id, u.address, u.first_name, u.last_name, u.email, u.user_type, u.state`

func scanUser(sc interface{ Scan(...any) error }) (userRow, error) {
	var u userRow
	err := sc.Scan(&u.id, &u.address, &u.first, &u.last, &u.email, &u.userType, &u.state)
	return u, err
}

// handleAddressByMeta answers operation 3 (POST
// /GetPatientAddressByMeta/{sessionId}/{directDomain}): every address of
// the patient in that domain, in creation order, with its current state.
// The patient is named by id or by all of firstName, lastName, dob and
// ssn4 (missing: 010; invalid ssn4 or dob: 205, as in provisioning).
//
// Result when no patient matches a lookup: "not shown". The sandbox
// answers success with an empty array ("patient": []): a search that
// finds nothing is not an error, and 210 names an address, which this
// look-up does not have. A patient with no address in the domain gives the
// same answer.
func (s *Server) handleAddressByMeta(ctx context.Context, c *call) (any, error) {
	if _, err := s.checkSession(c.param("session")); err != nil {
		return nil, err
	}
	var req directapi.IDProofedIndividual
	if err := c.decode(&req); err != nil {
		return nil, err
	}
	resp := directapi.GetPatientAddressesResponseType{Patient: []directapi.DirectUserDetail{}}
	err := s.tx(ctx, func(tx *sqlstmt.Tx) error {
		domain, err := s.checkDomain(tx, c.param("domain"))
		if err != nil {
			return err
		}
		var rows *sql.Rows
		like := "%@" + escapeLike(domain)
		if req.ID != 0 {
			rows, err = tx.Query(`SELECT `+userColumns+` FROM users u
				WHERE u.patient_id = ? AND u.address LIKE ? ESCAPE '\' ORDER BY u.id`, req.ID, like)
		} else {
			who, verr := s.validateIdentity(req)
			if verr != nil {
				return verr
			}
			rows, err = tx.Query(`SELECT `+userColumns+` FROM users u JOIN patients p ON p.id = u.patient_id
				WHERE p.first_name = ? COLLATE NOCASE AND p.last_name = ? COLLATE NOCASE AND p.ssn4 = ? AND p.dob = ?
				AND u.address LIKE ? ESCAPE '\' ORDER BY u.id`, who.firstName, who.lastName, who.ssn4, who.dob, like)
		}
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			u, err := scanUser(rows)
			if err != nil {
				return err
			}
			resp.Patient = append(resp.Patient, u.detail())
		}
		return rows.Err()
	})
	if err != nil {
		return nil, err
	}
	resp.ResellerAPIResponseType = regOK()
	return resp, nil
}

// resolveUsername turns a username of operations 4 and 5 into an address
// in domain: a local part gets "@domain"; a full address is accepted as
// it is. It reports the address and whether it is syntactically valid; a
// full address in another domain is valid but never found in this one.
func resolveUsername(username, domain string) (string, bool) {
	username = strings.TrimSpace(username)
	addr := username
	if !strings.Contains(username, "@") {
		addr = username + "@" + domain
	}
	norm, err := normAddress(addr)
	if err != nil || username == "" {
		return addr, false
	}
	return norm, true
}

// mailboxInDomain finds the mailbox addr in domain. Anything else (an
// unknown address, an address of another domain, a username that cannot
// form an address) is code 210 "Direct address not found", with the
// address in the text as the document requires.
func mailboxInDomain(tx *sqlstmt.Tx, username, domain string) (userRow, error) {
	addr, valid := resolveUsername(username, domain)
	notFound := regErr(directapi.RegCodeAddressNotFound, "Direct address not found: %s", addr)
	if !valid || domainOf(addr) != domain {
		return userRow{}, notFound
	}
	u, err := scanUser(tx.QueryRow(`SELECT `+userColumns+` FROM users u WHERE u.address = ?`, addr))
	if errors.Is(err, sql.ErrNoRows) {
		return userRow{}, notFound
	}
	return u, err
}

// handleAddressByUsername answers operation 4 (GET
// /GetPatientAddressByUsername/{sessionId}/{directDomain}/{directUsername}).
// directUsername is the local part (DirectUser.username); a full address
// in the domain is accepted too, since clients often hold only that. Any
// mailbox of the domain is found, also one not provisioned for a patient
// (its names are then empty). Not found is code 210: the document's code
// for "Direct address not found (text includes the address)".
func (s *Server) handleAddressByUsername(ctx context.Context, c *call) (any, error) {
	if _, err := s.checkSession(c.param("session")); err != nil {
		return nil, err
	}
	var resp directapi.GetPatientAddressesResponseType
	err := s.tx(ctx, func(tx *sqlstmt.Tx) error {
		domain, err := s.checkDomain(tx, c.param("domain"))
		if err != nil {
			return err
		}
		u, err := mailboxInDomain(tx, c.param("username"), domain)
		if err != nil {
			return err
		}
		resp = directapi.GetPatientAddressesResponseType{
			ResellerAPIResponseType: regOK(),
			Patient:                 []directapi.DirectUserDetail{u.detail()},
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return resp, nil
}

// handleSetPasswords answers operation 5 (POST
// /SetPatientsPasswords/{sessionId}/{directDomain}) with an array of
// UserPassword. Like the other operations it checks the session (011),
// the body (010), the domain (208) and then the arguments. It is all or
// nothing: every entry is checked first
// (empty array, missing username or password, password shorter than 8
// characters: 010; a username that is no mailbox of the domain: 210) and
// only then are the passwords set, in one transaction, so a failed
// request changes nothing. Whether the provider applies the valid entries
// of a partly invalid request is "not shown"; the sandbox refuses the
// whole request, which a client can retry after fixing it. When a
// username appears twice, the later entry wins. Only patients' addresses
// (provisioned with ProvisionIDProofedPatient) may be reset, as the
// operation's name says: another mailbox of the domain is code 013
// ("organization permission denied"), the closest documented code.
func (s *Server) handleSetPasswords(ctx context.Context, c *call) (any, error) {
	if _, err := s.checkSession(c.param("session")); err != nil {
		return nil, err
	}
	var req []directapi.UserPassword
	if err := c.decode(&req); err != nil {
		return nil, err
	}
	err := s.tx(ctx, func(tx *sqlstmt.Tx) error {
		domain, err := s.checkDomain(tx, c.param("domain"))
		if err != nil {
			return err
		}
		if len(req) == 0 {
			return regErr(directapi.RegCodeInvalidArgument, "argument missing: at least one UserPassword is required")
		}
		for i, up := range req {
			switch {
			case strings.TrimSpace(up.Username) == "":
				return regErr(directapi.RegCodeInvalidArgument, "argument missing: username of entry %d", i)
			case up.Password.Reveal() == "":
				return regErr(directapi.RegCodeInvalidArgument, "argument missing: password of entry %d", i)
			case utf8.RuneCountInString(up.Password.Reveal()) < minPasswordLen:
				return regErr(directapi.RegCodeInvalidArgument,
					"password of entry %d must have at least %d characters", i, minPasswordLen)
			}
		}
		ids := make([]int64, len(req))
		for i, up := range req {
			u, err := mailboxInDomain(tx, up.Username, domain)
			if err != nil {
				return err
			}
			var patient sql.NullInt64
			if err := tx.QueryRow(`SELECT patient_id FROM users WHERE id = ?`, u.id).Scan(&patient); err != nil {
				return err
			}
			if !patient.Valid {
				return regErr(directapi.RegCodeOrgPermission, "organization permission denied: %s is not a patient's address", u.address)
			}
			ids[i] = u.id
		}
		for i, up := range req {
			salt, hash := hashPassword(up.Password.Reveal())
			if _, err := tx.Exec(`UPDATE users SET pw_salt = ?, pw_hash = ? WHERE id = ?`, salt, hash, ids[i]); err != nil {
				return fmt.Errorf("sandbox: setting password: %w", err)
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return regOK(), nil
}
