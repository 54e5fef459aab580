package restclient

import (
	"context"
	"sync"
	"time"

	"github.com/directbridge/directbridge/upstream/directapi"
)

// SessionLifetime is how long a registration sessionId lives
// (registration-rest.md, "Session").
const SessionLifetime = 10 * time.Minute

// DefaultRenewMargin is how long before expiry a session is replaced, so a
// call never starts with a session about to lapse in flight.
const DefaultRenewMargin = time.Minute

// Registrar is the registration service seen through one reseller or T-user
// account. It logs in on first use, reuses the sessionId, logs in again
// before the session's 10 minutes run out, and when the provider still
// answers "011" (the session was dropped early, e.g. by a provider restart)
// it logs in afresh and retries the call once. Safe for concurrent use;
// concurrent callers share one login.
type Registrar struct {
	c       *Client
	creds   directapi.LoginRequest
	margin  time.Duration
	mu      sync.Mutex
	session directapi.Secret
	expires time.Time
}

// NewRegistrar returns a Registrar for the account username/password.
func (c *Client) NewRegistrar(username string, password directapi.Secret) *Registrar {
	return &Registrar{c: c, creds: directapi.LoginRequest{Username: username, Password: password}, margin: DefaultRenewMargin}
}

// SessionID returns a valid sessionId, logging in when there is none or the
// current one is within the renewal margin of its expiry.
func (r *Registrar) SessionID(ctx context.Context) (directapi.Secret, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := r.c.clock.Now()
	if r.session != "" && now.Before(r.expires.Add(-r.margin)) {
		return r.session, nil
	}
	// The lifetime counts from issue; taking the time before the request
	// is sent errs on the early side.
	id, err := r.c.Login(ctx, r.creds)
	if err != nil {
		r.session = ""
		return "", err
	}
	r.session, r.expires = id, now.Add(SessionLifetime)
	return id, nil
}

// drop forgets id if it is still the current session.
func (r *Registrar) drop(id directapi.Secret) {
	r.mu.Lock()
	if r.session == id {
		r.session = ""
	}
	r.mu.Unlock()
}

// with runs fn with a session, and once more with a fresh one if the
// provider rejects the session with "011". A "011" means the request was
// refused, not processed, so repeating even a provisioning call is safe.
func (r *Registrar) with(ctx context.Context, fn func(directapi.Secret) error) error {
	for try := 0; ; try++ {
		id, err := r.SessionID(ctx)
		if err != nil {
			return err
		}
		err = fn(id)
		if !IsAuthFailure(err) {
			return err
		}
		r.drop(id) // refused twice or once: either way it is no good
		if try > 0 {
			return err
		}
	}
}

// ProvisionIDProofedPatient is Client.ProvisionIDProofedPatient with a managed session.
func (r *Registrar) ProvisionIDProofedPatient(ctx context.Context, domain string, patient directapi.IDProofedIndividualRESTful) (resp *directapi.AddUsersResponseV2Type, err error) {
	err = r.with(ctx, func(id directapi.Secret) error {
		resp, err = r.c.ProvisionIDProofedPatient(ctx, id, domain, patient)
		return err
	})
	return resp, err
}

// GetPatientAddressByMeta is Client.GetPatientAddressByMeta with a managed session.
func (r *Registrar) GetPatientAddressByMeta(ctx context.Context, domain string, patient directapi.IDProofedIndividual) (users []directapi.DirectUserDetail, err error) {
	err = r.with(ctx, func(id directapi.Secret) error {
		users, err = r.c.GetPatientAddressByMeta(ctx, id, domain, patient)
		return err
	})
	return users, err
}

// GetPatientAddressByUsername is Client.GetPatientAddressByUsername with a managed session.
func (r *Registrar) GetPatientAddressByUsername(ctx context.Context, domain, username string) (users []directapi.DirectUserDetail, err error) {
	err = r.with(ctx, func(id directapi.Secret) error {
		users, err = r.c.GetPatientAddressByUsername(ctx, id, domain, username)
		return err
	})
	return users, err
}

// SetPatientsPasswords is Client.SetPatientsPasswords with a managed session.
func (r *Registrar) SetPatientsPasswords(ctx context.Context, domain string, passwords []directapi.UserPassword) error {
	return r.with(ctx, func(id directapi.Secret) error {
		return r.c.SetPatientsPasswords(ctx, id, domain, passwords)
	})
}
