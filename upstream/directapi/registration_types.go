package directapi

import "encoding/json"

// This file holds the resources of the patient registration service
// (registration-rest.md, "Resources and their fields"). JSON names are
// exactly the documented ones, including the capitalised UserStateType.

// LoginRequest logs a reseller or T-user account in.
type LoginRequest struct {
	Username string `json:"username"`
	Password Secret `json:"password"`
}

// ResellerAPIResponseType is the envelope of every registration response.
// Code is a string such as "000" or "011".
type ResellerAPIResponseType struct {
	Code         string `json:"code"`
	Success      bool   `json:"success"`
	ErrorMessage string `json:"errorMessage,omitempty"`
}

// Envelope returns r itself. Every registration response embeds
// ResellerAPIResponseType, so through this promoted method code that
// handles any response (the REST client) reaches its success flag, code
// and error message.
func (r *ResellerAPIResponseType) Envelope() *ResellerAPIResponseType { return r }

// Registration result codes (registration-rest.md, "Errors").
const (
	RegCodeSuccess             = "000"
	RegCodeInvalidUser         = "002"
	RegCodeOfferError          = "003"
	RegCodeInvalidArgument     = "010"
	RegCodeAuthFailed          = "011"
	RegCodeOrgMissing          = "012"
	RegCodeOrgPermission       = "013"
	RegCodeAccountError        = "014"
	RegCodeDebitAuthorize      = "021"
	RegCodeDebitCapture        = "022"
	RegCodeOther099            = "099"
	RegCodeDomainUsed          = "201"
	RegCodeNoVerifiedOrg       = "202"
	RegCodeOrgNotProvider      = "203"
	RegCodeInvalidState        = "204"
	RegCodeIDProofingFailed    = "205"
	RegCodeInvalidOrgType      = "206"
	RegCodeUnsupportedAddrType = "207"
	RegCodeNoOrgForDomain      = "208"
	RegCodeEmptyOrg            = "209"
	RegCodeAddressNotFound     = "210"
	RegCodeOther               = "999"
)

// LoginResponseType answers login; the session expires 10 minutes after issue.
type LoginResponseType struct {
	ResellerAPIResponseType
	SessionID Secret `json:"sessionId"`
}

// IDProofedIndividual identifies an identity-proofed patient: by Id, or by
// name, last four SSN digits and date of birth.
type IDProofedIndividual struct {
	ID        int64  `json:"id,omitempty"`
	FirstName string `json:"firstName,omitempty"`
	LastName  string `json:"lastName,omitempty"`
	SSN4      string `json:"ssn4,omitempty"`
	DOB       string `json:"dob,omitempty"`
}

// IDProofedIndividualRESTful is the body of ProvisionIDProofedPatient.
type IDProofedIndividualRESTful struct {
	IDProofedIndividual
	DirectUsername string `json:"directUsername,omitempty"`
	DirectPassword Secret `json:"directPassword,omitempty"`
}

// UserPassword is one entry of SetPatientsPasswords.
type UserPassword struct {
	Username string `json:"username"`
	Password Secret `json:"password"`
}

// BaseUser holds a person's contact data.
type BaseUser struct {
	FirstName                 string `json:"firstName"`
	LastName                  string `json:"lastName"`
	Email                     string `json:"email"`
	Phone                     string `json:"phone,omitempty"`
	DEA                       string `json:"dea,omitempty"`
	NPI                       string `json:"npi,omitempty"`
	SameAsOrganizationAddress *bool  `json:"sameAsOrganizationAddress,omitempty"`
	Address                   string `json:"address,omitempty"`
	City                      string `json:"city,omitempty"`
	State                     string `json:"state,omitempty"`
	Country                   string `json:"country,omitempty"`
	Zipcode                   string `json:"zipcode,omitempty"`
}

// AdminUser is a BaseUser whose phone is required.
type AdminUser struct {
	BaseUser
}

// DirectUserType is XD, SMTP, FTP, FTPS or SFTP.
type DirectUserType string

// The Direct user types of the document.
const (
	UserTypeXD   DirectUserType = "XD"
	UserTypeSMTP DirectUserType = "SMTP"
	UserTypeFTP  DirectUserType = "FTP"
	UserTypeFTPS DirectUserType = "FTPS"
	UserTypeSFTP DirectUserType = "SFTP"
)

// DirectUser is a Direct address (Username@domain) with its endpoint.
type DirectUser struct {
	BaseUser
	Username          string         `json:"username"`
	UserType          DirectUserType `json:"userType"`
	Endpoint          string         `json:"endpoint,omitempty"`
	EndpointDirectory string         `json:"endpointDirectory,omitempty"`
	EndpointUsername  string         `json:"endpointUsername,omitempty"`
	EndpointPassword  Secret         `json:"endpointPassword,omitempty"`
}

// UserStateType is the state of a Direct user.
type UserStateType string

// The user states of the document.
const (
	UserStateInit                   UserStateType = "init"
	UserStateProvisioned            UserStateType = "provisioned"
	UserStateProvisionedCertPending UserStateType = "provisioned_cert_pending"
	UserStateActivated              UserStateType = "activated"
	UserStateDisabled               UserStateType = "disabled"
	UserStateCertExpired            UserStateType = "provisioned_cert_expired"
	UserStateCertRevoked            UserStateType = "provisioned_cert_revoked"
	UserStateUnknown                UserStateType = "Unknown"
)

// DirectUserDetail is a DirectUser with its state.
type DirectUserDetail struct {
	DirectUser
	UserStateType UserStateType `json:"UserStateType"`
}

// Product is one purchased item of a PaymentConfirmation.
type Product struct {
	Name        string  `json:"name"`
	Description string  `json:"description,omitempty"`
	Quantity    int     `json:"quantity"`
	OfferPrice  float64 `json:"offerPrice"`
	SalePrice   float64 `json:"salePrice"`
	Amount      float64 `json:"amount"`
	StartDate   string  `json:"startDate,omitempty"`
	ExpireDate  string  `json:"expireDate,omitempty"`
}

// PaymentConfirmation describes the order that paid for new addresses.
type PaymentConfirmation struct {
	OrderID   int       `json:"orderId"`
	Amount    float64   `json:"amount"`
	OrderTime Date      `json:"orderTime"`
	Products  []Product `json:"products"`
	Detail    string    `json:"detail,omitempty"`
}

// AddUsersResponse lists newly added users.
type AddUsersResponse struct {
	ResellerAPIResponseType
	Users []DirectUserDetail `json:"users"`
}

// AddUsersResponseV2Type answers ProvisionIDProofedPatient.
type AddUsersResponseV2Type struct {
	AddUsersResponse
	PaymentConfirmation *PaymentConfirmation `json:"paymentConfirmation,omitempty"`
}

// GetPatientAddressesResponseType answers the two address look-ups.
type GetPatientAddressesResponseType struct {
	ResellerAPIResponseType
	Patient []DirectUserDetail `json:"patient"`
}

// ArchivedAuditFile is defined by the document but used by no operation.
type ArchivedAuditFile struct {
	Content      []byte `json:"content"`
	Name         string `json:"name"`
	Size         int64  `json:"size"`
	IsCompressed bool   `json:"isCompressed"`
}

// GetAuditFileResponseType is defined by the document but used by no operation.
type GetAuditFileResponseType struct {
	ResellerAPIResponseType
	ArchivedAuditedMessages *ArchivedAuditFile `json:"archivedAuditedMessages,omitempty"`
}

// ResellerDomainsResponse is defined by the document but used by no operation.
type ResellerDomainsResponse struct {
	ResellerAPIResponseType
	Domains []string `json:"domains"`
}

// GetMessageStatusReportResponse is defined by the registration document but
// used by no operation there; it has the shape of the messaging status report.
type GetMessageStatusReportResponse struct {
	ResellerAPIResponseType
	HasCvData   bool               `json:"hasCvData"`
	CsvData     CSVData            `json:"csvData,omitempty"`
	MessageLogs []DirectMessageLog `json:"messageLogs"`
}

// ResellerCreditCardsResponse is defined by the document but used by no
// operation; the fields of CreditCard are "not shown", so cards stay raw JSON.
type ResellerCreditCardsResponse struct {
	ResellerAPIResponseType
	Cards []json.RawMessage `json:"cards"`
}
