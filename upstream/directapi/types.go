package directapi

import (
	"encoding/json"
	"fmt"
)

// This file holds the resources of the messaging service
// (messaging-rest.md, "Resources and their fields"). JSON names are exactly
// the documented ones; required fields are never omitted, optional ones are
// omitted when empty.

// Authentication carries a mailbox user's credentials in every messaging
// request body.
type Authentication struct {
	Username string `json:"username"` // Direct e-mail address
	Password Secret `json:"password"`
}

// AuthenticationWithTuser is Authentication plus the Direct address a T-user
// acts for; used by the operations named ...WithTuser.
type AuthenticationWithTuser struct {
	Username   string `json:"username"`
	Password   Secret `json:"password"`
	DirectAddr string `json:"directAddr"`
}

// RecipientType is one of TO, CC, BCC.
type RecipientType string

// The recipient types of the document.
const (
	TO  RecipientType = "TO"
	CC  RecipientType = "CC"
	BCC RecipientType = "BCC"
)

// Recipient is one addressee of a Message.
type Recipient struct {
	Email string        `json:"email"`
	Type  RecipientType `json:"type"`
}

// Attachment is one file of a Message. Content is the base64 of the bytes.
type Attachment struct {
	Content     string `json:"content"`
	ContentType string `json:"contentType"`
	Filename    string `json:"filename"`
}

// MessageHeader is one custom header (name and unfolded value).
type MessageHeader struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

// Message is a message to send, and the base of MessageDetail.
type Message struct {
	Sender         string       `json:"sender"`
	Subject        string       `json:"subject,omitempty"`
	Body           string       `json:"body,omitempty"`
	HTMLBody       bool         `json:"htmlBody"`
	Recipients     []Recipient  `json:"recipients"`
	AttachmentList []Attachment `json:"attachmentList,omitempty"`
}

// MessageWithHeader is Message plus custom headers.
type MessageWithHeader struct {
	Message
	Headers []MessageHeader `json:"headers,omitempty"`
}

// RecipientCollection is the recipients field of UidsRequestType, used by
// Forward. Its fields are "not shown" in the document; it is written
// as a JSON array of Recipient (the same shape as Message.recipients) and
// read from an array or an object wrapping one (see UnmarshalJSON).
type RecipientCollection []Recipient

// UnmarshalJSON accepts [Recipient...] or {"recipients"|"recipient"|"items"|"list": [...]}.
func (rc *RecipientCollection) UnmarshalJSON(b []byte) error {
	var list []Recipient
	if err := json.Unmarshal(b, &list); err == nil {
		*rc = list
		return nil
	}
	var wrapped map[string]json.RawMessage
	if err := json.Unmarshal(b, &wrapped); err != nil {
		return fmt.Errorf("directapi: recipients: want an array of Recipient: %w", err)
	}
	for _, key := range []string{"recipients", "recipient", "items", "list"} {
		if raw, ok := wrapped[key]; ok {
			if err := json.Unmarshal(raw, &list); err != nil {
				return fmt.Errorf("directapi: recipients.%s: %w", key, err)
			}
			*rc = list
			return nil
		}
	}
	*rc = nil
	return nil
}

// SendRequest is the body of Send.
type SendRequest struct {
	Authentication Authentication `json:"authentication"`
	Message        Message        `json:"message"`
}

// SendRequestWithHeader is the body of SendWithHeader.
type SendRequestWithHeader struct {
	Authentication Authentication    `json:"authentication"`
	Message        MessageWithHeader `json:"message"`
}

// SendWithTuserRequest is the body of SendWithTuser.
type SendWithTuserRequest struct {
	Authentication AuthenticationWithTuser `json:"authentication"`
	Message        Message                 `json:"message"`
}

// SendWithHeaderWithTuserRequest is the body of SendWithHeaderWithTuser.
type SendWithHeaderWithTuserRequest struct {
	Authentication AuthenticationWithTuser `json:"authentication"`
	Message        MessageWithHeader       `json:"message"`
}

// UidsRequestType names messages of one folder by UID. Recipients is used
// by Forward only.
type UidsRequestType struct {
	Auth       Authentication      `json:"auth"`
	UIDs       []int64             `json:"uids"`
	Recipients RecipientCollection `json:"recipients,omitempty"`
}

// SmtpIdsRequestType asks for the delivery status of several messages.
type SmtpIdsRequestType struct {
	Auth    Authentication `json:"auth"`
	SmtpIDs []string       `json:"smtpIds"`
}

// SetFoldersSubscribedRequestType subscribes or unsubscribes folders.
type SetFoldersSubscribedRequestType struct {
	Auth       Authentication `json:"auth"`
	Folders    []string       `json:"folders"`
	Subscribed bool           `json:"subscribed"`
}

// RawMessagesRequestType carries raw RFC 5322 messages to SaveRawMessages.
type RawMessagesRequestType struct {
	Auth     Authentication `json:"auth"`
	Messages []RawMessage   `json:"messages"`
}

// FHIRQueryParameterType is defined by the document but used by no operation.
type FHIRQueryParameterType struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

// FHIRResourceType is defined by the document but used by no operation.
type FHIRResourceType struct {
	ResourceType    string                   `json:"resourceType"`
	QueryParameters []FHIRQueryParameterType `json:"queryParameters,omitempty"`
}

// APIResponse is the envelope of every messaging response.
type APIResponse struct {
	Success bool   `json:"success"`
	Code    int    `json:"code"`
	Message string `json:"message"`
}

// Envelope returns r itself. Every messaging response embeds APIResponse,
// so through this promoted method code that handles any response (the
// REST client) reaches its success flag, code and message.
func (r *APIResponse) Envelope() *APIResponse { return r }

// Messaging result codes (messaging-rest.md, "Errors").
const (
	CodeAuthFailed   = 1 // authentication failed
	CodeAddressError = 2 // address error
	CodeOtherError   = 3 // other error
	CodeOtherError4  = 4 // other error
)

// SendMessageResponseType answers the send and forward operations.
type SendMessageResponseType struct {
	APIResponse
	SmtpID string `json:"smtpId"`
}

// DirectMessageStatusReportResponseType answers the status operations.
// CsvData is []byte, which encoding/json writes as base64, the usual JSON
// form of a Java byte[]; decoding also accepts an array of numbers.
type DirectMessageStatusReportResponseType struct {
	APIResponse
	HasCvData   bool               `json:"hasCvData"`
	CsvData     CSVData            `json:"csvData,omitempty"`
	MessageLogs []DirectMessageLog `json:"messageLogs"`
}

// GetFoldersResponseType answers GetFolders and SetFoldersSubscribed.
type GetFoldersResponseType struct {
	APIResponse
	Folders []string `json:"folders"`
}

// GetCountResponse answers the count operations.
type GetCountResponse struct {
	APIResponse
	Count int `json:"count"`
}

// GetMessageResponse answers the operations that return messages.
type GetMessageResponse struct {
	APIResponse
	Messages []MessageDetail `json:"messages"`
}

// GetUIDResponseType answers GetUIDs.
type GetUIDResponseType struct {
	APIResponse
	UIDs []int64 `json:"uids"`
}

// GetRawMessageResponse answers GetRawMessagesByUIDs.
type GetRawMessageResponse struct {
	APIResponse
	Messages []RawMessage `json:"messages"`
}

// DirectMessageLog is the delivery record of one message to one recipient.
type DirectMessageLog struct {
	From          string `json:"from"`
	To            string `json:"to"`
	MessageID     string `json:"messageId"`
	MessageSize   int64  `json:"messageSize"`
	Status        string `json:"status"`
	StatusDetails string `json:"statusDetails,omitempty"`
	TS            Date   `json:"ts"`
	XdrID         string `json:"xdrId,omitempty"`
	UniqueID      string `json:"uniqueId,omitempty"`
	SourceID      string `json:"sourceId,omitempty"`
	PatientID     string `json:"patientId,omitempty"`
}

// Delivery status values (messaging-rest.md, "States and transitions").
const (
	StatusDelivered      = "Delivered"
	StatusWaiting        = "Waiting"
	StatusLocallyFailed  = "Locally Failed"
	StatusRemotelyFailed = "Remotely Failed"
	StatusNoMDNReceived  = "NO MDN Received"
)

// MessageDetail is a stored message as the provider reports it. The
// metadata operations leave Body and AttachmentList empty.
type MessageDetail struct {
	Message
	UID          int64           `json:"uid"`
	MsgNum       int             `json:"msgnum"`
	MsgID        string          `json:"msgID,omitempty"`
	Folder       string          `json:"folder,omitempty"`
	Expunged     bool            `json:"expunged"`
	Size         int             `json:"size"`
	SentDate     Date            `json:"sentDate"`
	ReceivedDate Date            `json:"receivedDate"`
	ReplyTo      string          `json:"replyTo,omitempty"`
	Headers      []MessageHeader `json:"headers,omitempty"`
}

// UnmarshalJSON decodes a MessageDetail and also accepts the attachments
// under the name "attachments", which the document's prose uses once for
// the inherited attachmentList field.
func (m *MessageDetail) UnmarshalJSON(b []byte) error {
	type plain MessageDetail
	aux := struct {
		*plain
		Attachments []Attachment `json:"attachments"`
	}{plain: (*plain)(m)}
	if err := json.Unmarshal(b, &aux); err != nil {
		return err
	}
	if len(m.AttachmentList) == 0 && len(aux.Attachments) > 0 {
		m.AttachmentList = aux.Attachments
	}
	return nil
}

// RawMessage is one raw RFC 5322 message; Data is its base64.
type RawMessage struct {
	UID    int64  `json:"uid,omitempty"`
	MsgID  string `json:"msgID,omitempty"`
	Folder string `json:"folder,omitempty"`
	Data   string `json:"data"`
}
