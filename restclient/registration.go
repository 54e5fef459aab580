package restclient

import (
	"context"
	"net/http"

	"github.com/directbridge/directbridge/upstream/directapi"
)

// This file holds one method per registration operation
// (registration-rest.md, "Endpoints"). The sessionId travels in the path,
// so it is a Secret here too and never appears in errors or logs.

func (c *Client) regURL(op string, segments ...string) (string, error) {
	return joinURL(c.regBase, op, segments...)
}

// Login logs a reseller or T-user account in (operation 1) and returns a
// sessionId that expires 10 minutes after issue. Login is repeatable: a
// second session does no harm.
func (c *Client) Login(ctx context.Context, req directapi.LoginRequest) (directapi.Secret, error) {
	u, _ := c.regURL("Login", "login")
	var resp directapi.LoginResponseType
	if err := c.do(ctx, request{op: "Login", method: http.MethodPost, url: u, body: req, class: repeatable}, &resp); err != nil {
		return "", err
	}
	return resp.SessionID, nil
}

// ProvisionIDProofedPatient provisions a Direct address for an
// identity-proofed patient under domain (operation 2). It is not retried
// once the request may have reached the provider: it creates an address
// and may charge the reseller.
func (c *Client) ProvisionIDProofedPatient(ctx context.Context, sessionID directapi.Secret, domain string, patient directapi.IDProofedIndividualRESTful) (*directapi.AddUsersResponseV2Type, error) {
	u, err := c.regURL("ProvisionIDProofedPatient", "ProvisionIDProofedPatient", sessionID.Reveal(), domain)
	if err != nil {
		return nil, err
	}
	var resp directapi.AddUsersResponseV2Type
	if err := c.do(ctx, request{op: "ProvisionIDProofedPatient", method: http.MethodPost, url: u, body: patient, class: once}, &resp); err != nil {
		return nil, err
	}
	return &resp, nil
}

// GetPatientAddressByMeta finds the addresses provisioned for a patient
// given by id, or by name, date of birth and SSN4 (operation 3).
func (c *Client) GetPatientAddressByMeta(ctx context.Context, sessionID directapi.Secret, domain string, patient directapi.IDProofedIndividual) ([]directapi.DirectUserDetail, error) {
	u, err := c.regURL("GetPatientAddressByMeta", "GetPatientAddressByMeta", sessionID.Reveal(), domain)
	if err != nil {
		return nil, err
	}
	var resp directapi.GetPatientAddressesResponseType
	if err := c.do(ctx, request{op: "GetPatientAddressByMeta", method: http.MethodPost, url: u, body: patient, class: repeatable}, &resp); err != nil {
		return nil, err
	}
	return resp.Patient, nil
}

// GetPatientAddressByUsername finds the address of a Direct username
// (the local part) under domain (operation 4, a GET without body).
func (c *Client) GetPatientAddressByUsername(ctx context.Context, sessionID directapi.Secret, domain, username string) ([]directapi.DirectUserDetail, error) {
	u, err := c.regURL("GetPatientAddressByUsername", "GetPatientAddressByUsername", sessionID.Reveal(), domain, username)
	if err != nil {
		return nil, err
	}
	var resp directapi.GetPatientAddressesResponseType
	if err := c.do(ctx, request{op: "GetPatientAddressByUsername", method: http.MethodGet, url: u, class: repeatable}, &resp); err != nil {
		return nil, err
	}
	return resp.Patient, nil
}

// SetPatientsPasswords resets the passwords of patients under domain
// (operation 5). Setting a password twice gives the same result, so it is
// retried like a read.
func (c *Client) SetPatientsPasswords(ctx context.Context, sessionID directapi.Secret, domain string, passwords []directapi.UserPassword) error {
	u, err := c.regURL("SetPatientsPasswords", "SetPatientsPasswords", sessionID.Reveal(), domain)
	if err != nil {
		return err
	}
	if passwords == nil {
		passwords = []directapi.UserPassword{}
	}
	var resp directapi.ResellerAPIResponseType
	return c.do(ctx, request{op: "SetPatientsPasswords", method: http.MethodPost, url: u, body: passwords, class: repeatable}, &resp)
}
