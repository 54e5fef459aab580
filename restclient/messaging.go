package restclient

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/directbridge/directbridge/upstream/directapi"
)

// This file holds one method per messaging operation
// (messaging-rest.md, "Endpoints"), in the document's order.

// msgURL joins escaped path segments below {msg}. It refuses empty segments
// and escapes dot-only segments, which HTTP servers would otherwise
// normalise away (RFC 3986 §5.2.4).
func (c *Client) msgURL(op string, segments ...string) (string, error) {
	return joinURL(c.msgBase, op, segments...)
}

func joinURL(base, op string, segments ...string) (string, error) {
	var b strings.Builder
	b.WriteString(base)
	for i, s := range segments {
		if i > 0 && s == "" {
			return "", fmt.Errorf("restclient: %s: empty path parameter", op)
		}
		b.WriteByte('/')
		if strings.Trim(s, ".") == "" {
			b.WriteString(strings.Repeat("%2E", len(s)))
			continue
		}
		b.WriteString(url.PathEscape(s))
	}
	return b.String(), nil
}

// send performs one of the four send operations. req holds the message
// with its long strings cut out into h (holes), written back in place,
// escaped, as the request is sent: the request is never held whole.
func (c *Client) send(ctx context.Context, op string, req any, h *holes) (string, error) {
	u, err := c.msgURL(op, op)
	if err != nil {
		return "", err
	}
	payload, err := h.body(req)
	if err != nil {
		return "", fmt.Errorf("restclient: %s: encoding request: %w", op, err)
	}
	var resp directapi.SendMessageResponseType
	if err := c.do(ctx, request{op: op, method: http.MethodPut, url: u, payload: payload, class: once}, &resp); err != nil {
		return "", err
	}
	return resp.SmtpID, nil
}

// Send sends msg (operation 1) and returns the smtpId of the message. The
// provider files an unread copy in INBOX.Sent. It is never retried once the
// request may have reached the provider; see OutcomeUnknown.
func (c *Client) Send(ctx context.Context, auth directapi.Authentication, msg directapi.Message) (string, error) {
	h := newHoles(minHole)
	return c.send(ctx, "Send", directapi.SendRequest{Authentication: auth, Message: h.message(msg)}, h)
}

// SendWithHeader sends msg with custom headers (operation 2).
func (c *Client) SendWithHeader(ctx context.Context, auth directapi.Authentication, msg directapi.MessageWithHeader) (string, error) {
	h := newHoles(minHole)
	return c.send(ctx, "SendWithHeader", directapi.SendRequestWithHeader{Authentication: auth, Message: h.messageWithHeader(msg)}, h)
}

// Forward forwards the messages with the given UIDs of folder to recipients
// (operation 3). Several UIDs are forwarded as attachments of one message.
func (c *Client) Forward(ctx context.Context, auth directapi.Authentication, folder string, uids []int64, recipients []directapi.Recipient) (string, error) {
	u, err := c.msgURL("Forward", "Forward", folder)
	if err != nil {
		return "", err
	}
	body := directapi.UidsRequestType{Auth: auth, UIDs: uids, Recipients: recipients}
	var resp directapi.SendMessageResponseType
	if err := c.do(ctx, request{op: "Forward", method: http.MethodPut, url: u, body: body, class: once}, &resp); err != nil {
		return "", err
	}
	return resp.SmtpID, nil
}

// status runs a status operation and returns its records, from messageLogs
// or csvData alike.
func (c *Client) status(ctx context.Context, op, u string, body any) ([]directapi.DirectMessageLog, error) {
	var resp directapi.DirectMessageStatusReportResponseType
	if err := c.do(ctx, request{op: op, method: http.MethodPost, url: u, body: body, class: repeatable}, &resp); err != nil {
		return nil, err
	}
	logs, err := resp.Logs()
	if err != nil {
		return nil, fmt.Errorf("restclient: %s: %w", op, err)
	}
	return logs, nil
}

// GetMessageStatus returns the delivery records of one sent message, one
// per recipient (operation 4).
func (c *Client) GetMessageStatus(ctx context.Context, auth directapi.Authentication, smtpID string) ([]directapi.DirectMessageLog, error) {
	u, err := c.msgURL("GetMessageStatus", "GetMessageStatus", smtpID)
	if err != nil {
		return nil, err
	}
	return c.status(ctx, "GetMessageStatus", u, auth)
}

// GetMessageStatuses returns the delivery records of several messages
// (operation 5, POST /GetMessageStatus/), in batches of BatchSize smtpIds.
func (c *Client) GetMessageStatuses(ctx context.Context, auth directapi.Authentication, smtpIDs []string) ([]directapi.DirectMessageLog, error) {
	u := c.msgBase + "/GetMessageStatus/"
	var all []directapi.DirectMessageLog
	for _, batch := range chunk(smtpIDs, c.batchSize) {
		logs, err := c.status(ctx, "GetMessageStatuses", u, directapi.SmtpIdsRequestType{Auth: auth, SmtpIDs: batch})
		if err != nil {
			return nil, err
		}
		all = append(all, logs...)
	}
	return all, nil
}

// count runs one of the count operations.
func (c *Client) count(ctx context.Context, op string, auth directapi.Authentication, folder string) (int, error) {
	u, err := c.msgURL(op, op, folder)
	if err != nil {
		return 0, err
	}
	var resp directapi.GetCountResponse
	if err := c.do(ctx, request{op: op, method: http.MethodPost, url: u, body: auth, class: repeatable}, &resp); err != nil {
		return 0, err
	}
	return resp.Count, nil
}

// GetMessageCount returns the number of messages in folder (operation 6).
func (c *Client) GetMessageCount(ctx context.Context, auth directapi.Authentication, folder string) (int, error) {
	return c.count(ctx, "GetMessageCount", auth, folder)
}

// GetUnreadMessageCount returns the number of unread messages (operation 7).
func (c *Client) GetUnreadMessageCount(ctx context.Context, auth directapi.Authentication, folder string) (int, error) {
	return c.count(ctx, "GetUnreadMessageCount", auth, folder)
}

// GetDeletedMessageCount returns the number of deleted messages (operation 8).
func (c *Client) GetDeletedMessageCount(ctx context.Context, auth directapi.Authentication, folder string) (int, error) {
	return c.count(ctx, "GetDeletedMessageCount", auth, folder)
}

// messages runs an operation that answers GetMessageResponse.
func (c *Client) messages(ctx context.Context, op string, body any, segments ...string) ([]directapi.MessageDetail, error) {
	u, err := c.msgURL(op, append([]string{op}, segments...)...)
	if err != nil {
		return nil, err
	}
	var resp wireMessages
	if err := c.do(ctx, request{op: op, method: http.MethodPost, url: u, body: body, class: repeatable}, &resp); err != nil {
		return nil, err
	}
	out := make([]directapi.MessageDetail, len(resp.Messages))
	for i := range resp.Messages {
		out[i] = resp.Messages[i].detail()
	}
	return out, nil
}

// wireMessages is directapi.GetMessageResponse as it is decoded here: its
// details without MessageDetail's UnmarshalJSON, which encoding/json
// calls with each detail's bytes after scanning them, to scan and decode
// them again. A busy folder's metadata search answers many details for
// every APPEND (mailstore/discover.go), and the second pass was a third of
// their cost (issue 22). The "attachments" alias MessageDetail accepts is
// taken the same way here (detail).
type wireMessages struct {
	directapi.APIResponse
	Messages []wireDetail `json:"messages"`
}

// plainDetail is MessageDetail without its methods.
type plainDetail directapi.MessageDetail

type wireDetail struct {
	plainDetail
	Attachments []directapi.Attachment `json:"attachments"`
}

// detail is the MessageDetail, with the attachments under the alias when
// attachmentList holds none (directapi.MessageDetail.UnmarshalJSON).
func (w *wireDetail) detail() directapi.MessageDetail {
	d := directapi.MessageDetail(w.plainDetail)
	if len(d.AttachmentList) == 0 && len(w.Attachments) > 0 {
		d.AttachmentList = w.Attachments
	}
	return d
}

// GetMessagesByUIDs returns the messages with the given UIDs (operation 9),
// in batches of BatchSize UIDs.
func (c *Client) GetMessagesByUIDs(ctx context.Context, auth directapi.Authentication, folder string, uids []int64) ([]directapi.MessageDetail, error) {
	var all []directapi.MessageDetail
	for _, batch := range chunk(uids, c.batchSize) {
		msgs, err := c.messages(ctx, "GetMessagesByUIDs", directapi.UidsRequestType{Auth: auth, UIDs: batch}, folder)
		if err != nil {
			return nil, err
		}
		all = append(all, msgs...)
	}
	return all, nil
}

// GetUnreadMessages returns all unread messages of folder (operation 10).
func (c *Client) GetUnreadMessages(ctx context.Context, auth directapi.Authentication, folder string) ([]directapi.MessageDetail, error) {
	return c.messages(ctx, "GetUnreadMessages", auth, folder)
}

func millis(t time.Time) string { return strconv.FormatInt(t.UnixMilli(), 10) }
func utcStamp(t time.Time) string {
	return t.UTC().Format(directapi.UTCLayout)
}

// GetMessagesByReceivedDate returns the messages received between begin and
// end (operation 11; the wire carries epoch milliseconds).
func (c *Client) GetMessagesByReceivedDate(ctx context.Context, auth directapi.Authentication, folder string, begin, end time.Time) ([]directapi.MessageDetail, error) {
	return c.messages(ctx, "GetMessagesByReceivedDate", auth, folder, millis(begin), millis(end))
}

// GetMessagesByReceivedDateUTC is GetMessagesByReceivedDate with the times
// written as UTC yyyyMMddHHmmss (operation 12); sub-second parts are dropped.
func (c *Client) GetMessagesByReceivedDateUTC(ctx context.Context, auth directapi.Authentication, folder string, begin, end time.Time) ([]directapi.MessageDetail, error) {
	return c.messages(ctx, "GetMessagesByReceivedDateUTC", auth, folder, utcStamp(begin), utcStamp(end))
}

// GetMessagesBySender returns the messages whose sender matches (operation 13).
func (c *Client) GetMessagesBySender(ctx context.Context, auth directapi.Authentication, folder, sender string) ([]directapi.MessageDetail, error) {
	return c.messages(ctx, "GetMessagesBySender", auth, folder, sender)
}

// GetMessagesBySubject returns the messages whose subject matches (operation 14).
func (c *Client) GetMessagesBySubject(ctx context.Context, auth directapi.Authentication, folder, subject string) ([]directapi.MessageDetail, error) {
	return c.messages(ctx, "GetMessagesBySubject", auth, folder, subject)
}

// GetMessages returns all messages of folder with bodies and attachments
// (operation 15).
func (c *Client) GetMessages(ctx context.Context, auth directapi.Authentication, folder string) ([]directapi.MessageDetail, error) {
	return c.messages(ctx, "GetMessages", auth, folder)
}

// GetMessageMetaData returns the metadata of all messages of folder, without
// bodies and attachments (operation 16).
func (c *Client) GetMessageMetaData(ctx context.Context, auth directapi.Authentication, folder string) ([]directapi.MessageDetail, error) {
	return c.messages(ctx, "GetMessageMetaData", auth, folder)
}

// SearchMessagesMetadataByReceivedDate returns metadata of the messages
// received between begin and end (operation 17; epoch milliseconds).
func (c *Client) SearchMessagesMetadataByReceivedDate(ctx context.Context, auth directapi.Authentication, folder string, begin, end time.Time) ([]directapi.MessageDetail, error) {
	return c.messages(ctx, "SearchMessagesMetadataByReceivedDate", auth, folder, millis(begin), millis(end))
}

// SearchMessagesMetadataByReceivedDateUTC is the same with UTC
// yyyyMMddHHmmss times (operation 18).
func (c *Client) SearchMessagesMetadataByReceivedDateUTC(ctx context.Context, auth directapi.Authentication, folder string, begin, end time.Time) ([]directapi.MessageDetail, error) {
	return c.messages(ctx, "SearchMessagesMetadataByReceivedDateUTC", auth, folder, utcStamp(begin), utcStamp(end))
}

// GetUIDs returns all UIDs of folder (operation 19).
func (c *Client) GetUIDs(ctx context.Context, auth directapi.Authentication, folder string) ([]int64, error) {
	u, err := c.msgURL("GetUIDs", "GetUIDs", folder)
	if err != nil {
		return nil, err
	}
	var resp directapi.GetUIDResponseType
	if err := c.do(ctx, request{op: "GetUIDs", method: http.MethodPost, url: u, body: auth, class: repeatable}, &resp); err != nil {
		return nil, err
	}
	return resp.UIDs, nil
}

// GetFolders returns the sub-folders of root (operation 20), only the
// subscribed ones when subscribedOnly is set. The flag is written "true" or
// "false", the text form of a Java boolean path parameter.
func (c *Client) GetFolders(ctx context.Context, auth directapi.Authentication, root string, subscribedOnly bool) ([]string, error) {
	u, err := c.msgURL("GetFolders", "GetFolders", root, strconv.FormatBool(subscribedOnly))
	if err != nil {
		return nil, err
	}
	var resp directapi.GetFoldersResponseType
	if err := c.do(ctx, request{op: "GetFolders", method: http.MethodPost, url: u, body: auth, class: repeatable}, &resp); err != nil {
		return nil, err
	}
	return resp.Folders, nil
}

// SetFoldersSubscribed subscribes or unsubscribes folders (operation 21)
// and returns the folder list of the answer.
func (c *Client) SetFoldersSubscribed(ctx context.Context, auth directapi.Authentication, folders []string, subscribed bool) ([]string, error) {
	body := directapi.SetFoldersSubscribedRequestType{Auth: auth, Folders: folders, Subscribed: subscribed}
	var resp directapi.GetFoldersResponseType
	if err := c.do(ctx, request{op: "SetFoldersSubscribed", method: http.MethodPost, url: c.msgBase + "/SetFoldersSubscribed/", body: body, class: repeatable}, &resp); err != nil {
		return nil, err
	}
	return resp.Folders, nil
}

// simple runs an operation that answers a bare APIResponse.
func (c *Client) simple(ctx context.Context, op string, class retryClass, body any, segments ...string) error {
	u, err := c.msgURL(op, append([]string{op}, segments...)...)
	if err != nil {
		return err
	}
	var resp directapi.APIResponse
	return c.do(ctx, request{op: op, method: http.MethodPost, url: u, body: body, class: class}, &resp)
}

// CreateFolder creates folder (operation 22).
func (c *Client) CreateFolder(ctx context.Context, auth directapi.Authentication, folder string) error {
	return c.simple(ctx, "CreateFolder", once, auth, folder)
}

// MoveFolder renames a non-reserved folder (operation 23).
func (c *Client) MoveFolder(ctx context.Context, auth directapi.Authentication, folder, newFolder string) error {
	return c.simple(ctx, "MoveFolder", once, auth, folder, newFolder)
}

// DeleteFolder deletes a non-reserved folder with its messages and
// sub-folders, recursively (operation 24).
func (c *Client) DeleteFolder(ctx context.Context, auth directapi.Authentication, folder string) error {
	return c.simple(ctx, "DeleteFolder", once, auth, folder)
}

// byUIDs runs a UID operation in batches. After a failure past the first
// batch it returns a *PartialError saying how many UIDs were processed.
func (c *Client) byUIDs(ctx context.Context, op string, class retryClass, auth directapi.Authentication, uids []int64, segments ...string) error {
	done := 0
	for _, batch := range chunk(uids, c.batchSize) {
		if err := c.simple(ctx, op, class, directapi.UidsRequestType{Auth: auth, UIDs: batch}, segments...); err != nil {
			if done > 0 {
				return &PartialError{Op: op, Done: done, Err: err}
			}
			return err
		}
		done += len(batch)
	}
	return nil
}

// CopyMessagesByUIDs copies messages of folder to dest (operation 25).
func (c *Client) CopyMessagesByUIDs(ctx context.Context, auth directapi.Authentication, folder, dest string, uids []int64) error {
	return c.byUIDs(ctx, "CopyMessagesByUIDs", once, auth, uids, folder, dest)
}

// MoveMessagesByUIDs moves messages of folder to dest (operation 26).
func (c *Client) MoveMessagesByUIDs(ctx context.Context, auth directapi.Authentication, folder, dest string, uids []int64) error {
	return c.byUIDs(ctx, "MoveMessagesByUIDs", once, auth, uids, folder, dest)
}

// DeleteMessagesByUIDs deletes messages (operation 27): to INBOX.Trash when
// deleteForever is false, for good when it is true.
func (c *Client) DeleteMessagesByUIDs(ctx context.Context, auth directapi.Authentication, folder string, uids []int64, deleteForever bool) error {
	return c.byUIDs(ctx, "DeleteMessagesByUIDs", once, auth, uids, folder, strconv.FormatBool(deleteForever))
}

// MarkMessagesAsReadByUIDs marks messages read (operation 28).
func (c *Client) MarkMessagesAsReadByUIDs(ctx context.Context, auth directapi.Authentication, folder string, uids []int64) error {
	return c.byUIDs(ctx, "MarkMessagesAsReadByUIDs", repeatable, auth, uids, folder)
}

// MarkMessagesAsUnreadByUIDs marks messages unread (operation 29). Its
// request body is "not shown"; this client sends UidsRequestType, as for
// the read marking.
func (c *Client) MarkMessagesAsUnreadByUIDs(ctx context.Context, auth directapi.Authentication, folder string, uids []int64) error {
	return c.byUIDs(ctx, "MarkMessagesAsUnreadByUIDs", repeatable, auth, uids, folder)
}

// GetRawMessagesByUIDs returns the raw messages with the given UIDs
// (operation 30), in batches. Its request body is "not shown"; this client
// sends UidsRequestType. Use RawMessage.Bytes to decode each one.
func (c *Client) GetRawMessagesByUIDs(ctx context.Context, auth directapi.Authentication, folder string, uids []int64) ([]directapi.RawMessage, error) {
	u, err := c.msgURL("GetRawMessagesByUIDs", "GetRawMessagesByUIDs", folder)
	if err != nil {
		return nil, err
	}
	var all []directapi.RawMessage
	for _, batch := range chunk(uids, c.batchSize) {
		var resp directapi.GetRawMessageResponse
		req := request{op: "GetRawMessagesByUIDs", method: http.MethodPost, url: u, body: directapi.UidsRequestType{Auth: auth, UIDs: batch}, class: repeatable}
		if err := c.do(ctx, req, &resp); err != nil {
			return nil, err
		}
		all = append(all, resp.Messages...)
	}
	return all, nil
}

// SaveRawMessages appends raw RFC 5322 messages to folder (operation 31).
// The answer carries no UIDs. Messages go in batches; after a failure past
// the first batch a *PartialError says how many were saved.
func (c *Client) SaveRawMessages(ctx context.Context, auth directapi.Authentication, folder string, messages []directapi.RawMessage) error {
	return c.saveBatches(ctx, folder, len(messages), func(lo, hi int) (request, error) {
		return request{body: directapi.RawMessagesRequestType{Auth: auth, Messages: messages[lo:hi]}}, nil
	})
}

// SaveRaw is SaveRawMessages for messages given as bytes. The request body
// is the same JSON as SaveRawMessages sends, encoded while it is written
// (rawBody): the messages' bytes are all it holds.
func (c *Client) SaveRaw(ctx context.Context, auth directapi.Authentication, folder string, raws [][]byte) error {
	return c.saveBatches(ctx, folder, len(raws), func(lo, hi int) (request, error) {
		b, err := newRawBody(auth, raws[lo:hi])
		if err != nil {
			return request{}, fmt.Errorf("restclient: SaveRawMessages: encoding request: %w", err)
		}
		return request{payload: b}, nil
	})
}

// saveBatches sends n messages to SaveRawMessages in batches, each request
// made by body for the messages lo to hi; after a failure past the first
// batch a *PartialError says how many were saved.
func (c *Client) saveBatches(ctx context.Context, folder string, n int, body func(lo, hi int) (request, error)) error {
	u, err := c.msgURL("SaveRawMessages", "SaveRawMessages", folder)
	if err != nil {
		return err
	}
	for lo := 0; lo < n; lo += c.batchSize {
		hi := min(lo+c.batchSize, n)
		req, err := body(lo, hi)
		if err != nil {
			return err
		}
		req.op, req.method, req.url, req.class = "SaveRawMessages", http.MethodPost, u, once
		var resp directapi.APIResponse
		if err := c.do(ctx, req, &resp); err != nil {
			if lo > 0 {
				return &PartialError{Op: "SaveRawMessages", Done: lo, Err: err}
			}
			return err
		}
	}
	return nil
}

// SendWithTuser is Send on behalf of auth.DirectAddr (operation 32).
func (c *Client) SendWithTuser(ctx context.Context, auth directapi.AuthenticationWithTuser, msg directapi.Message) (string, error) {
	h := newHoles(minHole)
	return c.send(ctx, "SendWithTuser", directapi.SendWithTuserRequest{Authentication: auth, Message: h.message(msg)}, h)
}

// SendWithHeaderWithTuser is SendWithHeader on behalf of auth.DirectAddr
// (operation 33).
func (c *Client) SendWithHeaderWithTuser(ctx context.Context, auth directapi.AuthenticationWithTuser, msg directapi.MessageWithHeader) (string, error) {
	h := newHoles(minHole)
	return c.send(ctx, "SendWithHeaderWithTuser", directapi.SendWithHeaderWithTuserRequest{Authentication: auth, Message: h.messageWithHeader(msg)}, h)
}

// GetMessageStatusWithTuser is GetMessageStatus for a T-user (operation 34).
func (c *Client) GetMessageStatusWithTuser(ctx context.Context, auth directapi.AuthenticationWithTuser, smtpID string) ([]directapi.DirectMessageLog, error) {
	u, err := c.msgURL("GetMessageStatusWithTuser", "GetMessageStatusWithTuser", smtpID)
	if err != nil {
		return nil, err
	}
	return c.status(ctx, "GetMessageStatusWithTuser", u, auth)
}

// chunk splits s into slices of at most n items. An empty s gives no
// batch at all: an operation on nothing costs no round trip.
func chunk[T any](s []T, n int) [][]T {
	var out [][]T
	if len(s) == 0 {
		return nil
	}
	for len(s) > n {
		out = append(out, s[:n:n])
		s = s[n:]
	}
	return append(out, s)
}
