package restclient

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/directbridge/directbridge/upstream"
	"github.com/directbridge/directbridge/upstream/directapi"
)

// Upstream adapts c to upstream.Provider, the interface the bridge's mail
// engine and fronts use. It is the one place outside this package's own
// error types that reads the provider's result codes: every error it
// returns wraps one of upstream's sentinel classes (see classify).
//
// It is an upstream.RequestPacer: the Client waits for the budget its
// context carries before every request (upstream.Pace), so
// upstream.WithBudget charges each HTTP request a call sends, not the
// call.
func Upstream(c *Client) upstream.Provider { return adapter{c} }

type adapter struct{ c *Client }

var _ upstream.RequestPacer = adapter{}

// PacesRequests reports that the Client calls upstream.Pace before each
// request (Client.do).
func (adapter) PacesRequests() bool { return true }

// Whether an operation changes something at the provider. A change whose
// request may have reached the provider is ErrUnknownOutcome when it
// fails; a read is simply unavailable.
const (
	read   = false
	change = true
)

// classify maps the client's errors to upstream's classes.
//
//   - code 1 is ErrAuth, code 2 ErrAddress (messaging-rest.md, "Errors");
//   - codes 3 and 4 ("other error") and HTTP refusals without the
//     provider's envelope are ErrRefused, with the provider's text;
//   - a batched change that failed after some batches went through, and a
//     change whose request may have been processed (sent, then no answer,
//     a 5xx, or an answer that is not the documented JSON), are
//     ErrUnknownOutcome;
//   - every other transport failure, timeout, 429 or 5xx is ErrTemporary.
func classify(op string, changes bool, err error) error {
	if err == nil {
		return nil
	}
	e := &upstream.Error{Op: op, Err: err}
	var ae *APIError
	var pe *PartialError
	var pre *ProtocolError
	switch {
	case errors.As(err, &pe) && changes:
		e.Class = upstream.ErrUnknownOutcome
	case IsAuthFailure(err):
		e.Class = upstream.ErrAuth
	case IsAddressError(err):
		e.Class, e.Message = upstream.ErrAddress, apiText(err)
	case errors.As(err, &ae) && ae.Code == directapi.CodeOtherError4:
		// Code 4 is the second "other error" of the document; the
		// sandbox, and providers like it, give it to their own failures.
		// Taken as temporary: a request turned down is not carried out,
		// and a wrongly permanent answer would make clients give up.
		e.Class, e.Message = upstream.ErrTemporary, ae.Message
	case errors.As(err, &ae):
		e.Class, e.Message = upstream.ErrRefused, ae.Message
	case changes && OutcomeUnknown(err):
		e.Class = upstream.ErrUnknownOutcome
		var te *TemporaryError
		if errors.As(err, &te) {
			e.Busy, e.Unreachable = te.StatusCode == 429, te.StatusCode == 0
		}
	case errors.As(err, &pre):
		switch {
		case changes && pre.StatusCode >= 200 && pre.StatusCode < 300:
			// The provider answered 200 with a body that is not the
			// documented JSON: it may well have done the work.
			e.Class = upstream.ErrUnknownOutcome
		case pre.StatusCode >= 400 && pre.StatusCode < 500:
			e.Class = upstream.ErrRefused
		default:
			e.Class = upstream.ErrTemporary
		}
	default:
		var te *TemporaryError
		if errors.As(err, &te) {
			e.Busy, e.Unreachable = te.StatusCode == 429, te.StatusCode == 0
		}
		// Transport failures, timeouts, 429 and 5xx that did not reach
		// the provider, the caller's context ending, and failures to
		// build a request.
		e.Class = upstream.ErrTemporary
	}
	return e
}

func apiText(err error) string {
	var ae *APIError
	if errors.As(err, &ae) {
		return ae.Message
	}
	return ""
}

func (a adapter) CheckCredentials(ctx context.Context, auth upstream.Auth) error {
	_, err := a.c.GetMessageCount(ctx, auth, "INBOX")
	return classify("GetMessageCount", read, err)
}

// CheckTuser asks GetMessageStatusWithTuser for an smtpId that cannot
// exist: a read that authenticates both the account and directAddr and
// returns no records (a T-user need not have a mailbox of its own).
func (a adapter) CheckTuser(ctx context.Context, auth directapi.AuthenticationWithTuser) error {
	_, err := a.c.GetMessageStatusWithTuser(ctx, auth, "directbridge-credential-check")
	return classify("GetMessageStatusWithTuser", read, err)
}

func (a adapter) Folders(ctx context.Context, auth upstream.Auth, root string, subscribedOnly bool) ([]string, error) {
	f, err := a.c.GetFolders(ctx, auth, root, subscribedOnly)
	return f, classify("GetFolders", read, err)
}

func (a adapter) SetSubscribed(ctx context.Context, auth upstream.Auth, folders []string, subscribed bool) error {
	_, err := a.c.SetFoldersSubscribed(ctx, auth, folders, subscribed)
	return classify("SetFoldersSubscribed", change, err)
}

func (a adapter) CreateFolder(ctx context.Context, auth upstream.Auth, folder string) error {
	return classify("CreateFolder", change, a.c.CreateFolder(ctx, auth, folder))
}

func (a adapter) RenameFolder(ctx context.Context, auth upstream.Auth, folder, newName string) error {
	return classify("MoveFolder", change, a.c.MoveFolder(ctx, auth, folder, newName))
}

func (a adapter) DeleteFolder(ctx context.Context, auth upstream.Auth, folder string) error {
	return classify("DeleteFolder", change, a.c.DeleteFolder(ctx, auth, folder))
}

func (a adapter) UIDs(ctx context.Context, auth upstream.Auth, folder string) ([]int64, error) {
	u, err := a.c.GetUIDs(ctx, auth, folder)
	return u, classify("GetUIDs", read, err)
}

func (a adapter) Count(ctx context.Context, auth upstream.Auth, folder string) (int, error) {
	n, err := a.c.GetMessageCount(ctx, auth, folder)
	return n, classify("GetMessageCount", read, err)
}

func (a adapter) UnreadCount(ctx context.Context, auth upstream.Auth, folder string) (int, error) {
	n, err := a.c.GetUnreadMessageCount(ctx, auth, folder)
	return n, classify("GetUnreadMessageCount", read, err)
}

func (a adapter) Unread(ctx context.Context, auth upstream.Auth, folder string) ([]directapi.MessageDetail, error) {
	m, err := a.c.GetUnreadMessages(ctx, auth, folder)
	return m, classify("GetUnreadMessages", read, err)
}

func (a adapter) Metadata(ctx context.Context, auth upstream.Auth, folder string) ([]directapi.MessageDetail, error) {
	m, err := a.c.GetMessageMetaData(ctx, auth, folder)
	return m, classify("GetMessageMetaData", read, err)
}

func (a adapter) MetadataReceived(ctx context.Context, auth upstream.Auth, folder string, begin, end time.Time) ([]directapi.MessageDetail, error) {
	m, err := a.c.SearchMessagesMetadataByReceivedDate(ctx, auth, folder, begin, end)
	return m, classify("SearchMessagesMetadataByReceivedDate", read, err)
}

func (a adapter) Messages(ctx context.Context, auth upstream.Auth, folder string, uids []int64) ([]directapi.MessageDetail, error) {
	m, err := a.c.GetMessagesByUIDs(ctx, auth, folder, uids)
	return m, classify("GetMessagesByUIDs", read, err)
}

func (a adapter) Raw(ctx context.Context, auth upstream.Auth, folder string, uids []int64) (map[int64][]byte, error) {
	got, err := a.c.GetRawMessagesByUIDs(ctx, auth, folder, uids)
	if err != nil {
		return nil, classify("GetRawMessagesByUIDs", read, err)
	}
	out := make(map[int64][]byte, len(got))
	for _, r := range got {
		b, err := r.Bytes()
		if err != nil {
			return nil, classify("GetRawMessagesByUIDs", read, &ProtocolError{Op: "GetRawMessagesByUIDs", StatusCode: 200, Err: err})
		}
		out[r.UID] = b
	}
	return out, nil
}

func (a adapter) SetRead(ctx context.Context, auth upstream.Auth, folder string, uids []int64, isRead bool) error {
	if isRead {
		return classify("MarkMessagesAsReadByUIDs", change, a.c.MarkMessagesAsReadByUIDs(ctx, auth, folder, uids))
	}
	return classify("MarkMessagesAsUnreadByUIDs", change, a.c.MarkMessagesAsUnreadByUIDs(ctx, auth, folder, uids))
}

func (a adapter) Copy(ctx context.Context, auth upstream.Auth, folder, dest string, uids []int64) error {
	return classify("CopyMessagesByUIDs", change, a.c.CopyMessagesByUIDs(ctx, auth, folder, dest, uids))
}

func (a adapter) Move(ctx context.Context, auth upstream.Auth, folder, dest string, uids []int64) error {
	return classify("MoveMessagesByUIDs", change, a.c.MoveMessagesByUIDs(ctx, auth, folder, dest, uids))
}

func (a adapter) Delete(ctx context.Context, auth upstream.Auth, folder string, uids []int64, forever bool) error {
	return classify("DeleteMessagesByUIDs", change, a.c.DeleteMessagesByUIDs(ctx, auth, folder, uids, forever))
}

func (a adapter) Save(ctx context.Context, auth upstream.Auth, folder string, raws [][]byte) error {
	return classify("SaveRawMessages", change, a.c.SaveRaw(ctx, auth, folder, raws))
}

func (a adapter) Send(ctx context.Context, auth upstream.Auth, tuser string, msg directapi.MessageWithHeader, withHeaders bool) (string, error) {
	op, req, h := sendRequest(auth, tuser, msg, withHeaders)
	id, err := a.c.send(ctx, op, req, h)
	return id, classify("Send", change, err)
}

// sendRequest is the operation and request the adapter's Send makes for
// its arguments (the message's long strings cut into h), shared with
// SendSize so that the size told is that of the request sent.
func sendRequest(auth upstream.Auth, tuser string, msg directapi.MessageWithHeader, withHeaders bool) (op string, req any, h *holes) {
	h = newHoles(minHole)
	tauth := directapi.AuthenticationWithTuser{Username: auth.Username, Password: auth.Password, DirectAddr: tuser}
	switch {
	case tuser == "" && withHeaders:
		return "SendWithHeader", directapi.SendRequestWithHeader{Authentication: auth, Message: h.messageWithHeader(msg)}, h
	case tuser == "":
		return "Send", directapi.SendRequest{Authentication: auth, Message: h.message(msg.Message)}, h
	case withHeaders:
		return "SendWithHeaderWithTuser", directapi.SendWithHeaderWithTuserRequest{Authentication: tauth, Message: h.messageWithHeader(msg)}, h
	default:
		return "SendWithTuser", directapi.SendWithTuserRequest{Authentication: tauth, Message: h.message(msg.Message)}, h
	}
}

// SendSize is the exact length in bytes of the request body that
// Upstream's Send writes for these arguments, counted without writing
// it: a pass over the message's strings, which are escaped as JSON needs
// (a control character takes six bytes). A front compares it with the
// provider's request limit, and counts it in its budget of message
// bytes, before the message goes out (smtpbackend, DATA). It fails only
// when the request cannot be encoded at all.
func SendSize(auth upstream.Auth, tuser string, msg directapi.MessageWithHeader, withHeaders bool) (int64, error) {
	op, req, h := sendRequest(auth, tuser, msg, withHeaders)
	b, err := h.body(req)
	if err != nil {
		return 0, fmt.Errorf("restclient: %s: encoding request: %w", op, err)
	}
	return b.Len(), nil
}

// SaveSize is the exact length in bytes of the request body that
// Upstream's Save writes for messages of the given sizes in one batch
// (SaveRawMessages: each message base64 encoded, a third larger). A front
// counts it in its budget of message bytes before the message is read
// (imapbackend, APPEND).
func SaveSize(auth upstream.Auth, sizes ...int64) (int64, error) {
	head, err := encodeJSON(auth)
	if err != nil {
		return 0, fmt.Errorf("restclient: SaveRawMessages: encoding request: %w", err)
	}
	return rawBodyLen(len(head)-1, sizes), nil // less encodeJSON's newline, as newRawBody
}

func (a adapter) Forward(ctx context.Context, auth upstream.Auth, folder string, uids []int64, recipients []directapi.Recipient) (string, error) {
	id, err := a.c.Forward(ctx, auth, folder, uids, recipients)
	return id, classify("Forward", change, err)
}

func (a adapter) Status(ctx context.Context, auth upstream.Auth, smtpIDs []string) ([]directapi.DirectMessageLog, error) {
	var logs []directapi.DirectMessageLog
	var err error
	if len(smtpIDs) == 1 {
		logs, err = a.c.GetMessageStatus(ctx, auth, smtpIDs[0])
	} else {
		logs, err = a.c.GetMessageStatuses(ctx, auth, smtpIDs)
	}
	return logs, classify("GetMessageStatus", read, err)
}

func (a adapter) TuserStatus(ctx context.Context, auth directapi.AuthenticationWithTuser, smtpID string) ([]directapi.DirectMessageLog, error) {
	logs, err := a.c.GetMessageStatusWithTuser(ctx, auth, smtpID)
	return logs, classify("GetMessageStatusWithTuser", read, err)
}
