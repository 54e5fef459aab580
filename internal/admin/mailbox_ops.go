package admin

import (
	"context"
	"encoding/json"
	"strings"
	"time"

	"github.com/directbridge/directbridge/upstream/directapi"
)

// The mailbox operations no mail protocol reaches: Forward (the
// provider forwards stored messages itself, attachments and all) and the
// folder counts, GetDeletedMessageCount among them.

// Operations on a mailbox with its own credentials.
const (
	OpForward = "forward"
	OpStats   = "stats"
)

// ForwardArgs are the arguments of "forward": the messages UIDs of
// Folder, forwarded by the provider to Recipients (addresses; "TO" unless
// given as "cc:addr" or "bcc:addr").
type ForwardArgs struct {
	User       string           `json:"user"`
	Password   directapi.Secret `json:"password"`
	Folder     string           `json:"folder"`
	UIDs       []int64          `json:"uids"`
	Recipients []string         `json:"recipients"`
}

// ForwardResult answers "forward" with the provider's smtpId.
type ForwardResult struct {
	SmtpID string `json:"smtpId"`
}

// StatsArgs are the arguments of "stats": Folders default to every
// folder of the mailbox.
type StatsArgs struct {
	User     string           `json:"user"`
	Password directapi.Secret `json:"password"`
	Folders  []string         `json:"folders,omitempty"`
}

// FolderStats are one folder's counts.
type FolderStats struct {
	Folder   string `json:"folder"`
	Messages int    `json:"messages"`
	Unread   int    `json:"unread"`
	// Deleted counts the messages deleted from the folder that still
	// wait in INBOX.Trash (GetDeletedMessageCount).
	Deleted int `json:"deleted"`
}

// StatsResult answers "stats".
type StatsResult struct {
	Folders []FolderStats `json:"folders"`
}

// maxStatsFolders bounds the folders of one "stats" request (three
// requests each).
const maxStatsFolders = 200

func (s *Server) forward(ctx context.Context, raw json.RawMessage) (any, error) {
	var a ForwardArgs
	if err := decodeArgs(raw, &a); err != nil {
		return nil, err
	}
	for _, f := range [][2]string{{"user", a.User}, {"folder", a.Folder}} {
		if err := required(f[0], f[1]); err != nil {
			return nil, err
		}
	}
	if a.Password == "" {
		return nil, errorf(CodeBadRequest, "args: password is required")
	}
	if len(a.UIDs) == 0 || len(a.Recipients) == 0 {
		return nil, errorf(CodeBadRequest, "args: uids and recipients are required")
	}
	var rcpts []directapi.Recipient
	for _, r := range a.Recipients {
		typ := directapi.TO
		if kind, addr, ok := strings.Cut(r, ":"); ok && !strings.Contains(kind, "@") {
			switch strings.ToLower(kind) {
			case "cc":
				typ = directapi.CC
			case "bcc":
				typ = directapi.BCC
			case "to":
			default:
				return nil, errorf(CodeBadRequest, "args: recipient %q: the prefix must be to:, cc: or bcc:", r)
			}
			r = addr
		}
		if !strings.Contains(r, "@") {
			return nil, errorf(CodeBadRequest, "args: recipient %q is not an address", r)
		}
		rcpts = append(rcpts, directapi.Recipient{Email: strings.TrimSpace(r), Type: typ})
	}
	id, err := s.cfg.Client.Forward(ctx, directapi.Authentication{Username: a.User, Password: a.Password}, a.Folder, a.UIDs, rcpts)
	if err != nil {
		return nil, err
	}
	return ForwardResult{SmtpID: id}, nil
}

func (s *Server) stats(ctx context.Context, raw json.RawMessage) (any, error) {
	var a StatsArgs
	if err := decodeArgs(raw, &a); err != nil {
		return nil, err
	}
	if err := required("user", a.User); err != nil {
		return nil, err
	}
	if a.Password == "" {
		return nil, errorf(CodeBadRequest, "args: password is required")
	}
	auth := directapi.Authentication{Username: a.User, Password: a.Password}
	folders := a.Folders
	if len(folders) == 0 {
		all, err := s.cfg.Client.GetFolders(ctx, auth, "INBOX", false)
		if err != nil {
			return nil, err
		}
		folders = all
	}
	if len(folders) > maxStatsFolders {
		return nil, errorf(CodeBadRequest, "args: at most %d folders", maxStatsFolders)
	}
	result := StatsResult{Folders: []FolderStats{}}
	for _, f := range folders {
		st := FolderStats{Folder: f}
		var err error
		if st.Messages, err = s.cfg.Client.GetMessageCount(ctx, auth, f); err != nil {
			return nil, err
		}
		if st.Unread, err = s.cfg.Client.GetUnreadMessageCount(ctx, auth, f); err != nil {
			return nil, err
		}
		if st.Deleted, err = s.cfg.Client.GetDeletedMessageCount(ctx, auth, f); err != nil {
			return nil, err
		}
		result.Folders = append(result.Folders, st)
	}
	return result, nil
}

// OpMessages lists a folder's messages with the provider's own listing
// and search operations, for integrators checking what the provider
// holds: by received date (epoch or UTC form of the operation, whole
// messages or metadata), by sender, by subject, or all.
const OpMessages = "messages"

// MessagesArgs are the arguments of "messages". Exactly one selection:
// Since and Before (RFC 3339) for the received-date operations, Sender,
// Subject, or All. UTC picks the operations' UTC form; Full the whole
// messages rather than metadata (by date: GetMessagesByReceivedDate*
// instead of SearchMessagesMetadataByReceivedDate*; All: GetMessages
// instead of GetMessageMetaData). What the provider matches for sender
// and subject (exact or part) is not shown; its answer is passed on.
type MessagesArgs struct {
	User     string           `json:"user"`
	Password directapi.Secret `json:"password"`
	Folder   string           `json:"folder"`
	Since    time.Time        `json:"since,omitzero"`
	Before   time.Time        `json:"before,omitzero"`
	UTC      bool             `json:"utc,omitempty"`
	Full     bool             `json:"full,omitempty"`
	Sender   string           `json:"sender,omitempty"`
	Subject  string           `json:"subject,omitempty"`
	All      bool             `json:"all,omitempty"`
}

// MessageSummary is what "messages" reports of one message: its
// metadata, never its body or attachment contents.
type MessageSummary struct {
	UID          int64     `json:"uid"`
	MessageID    string    `json:"messageId,omitempty"`
	Sender       string    `json:"sender,omitempty"`
	Recipients   int       `json:"recipients"`
	Size         int       `json:"size"`
	ReceivedDate time.Time `json:"receivedDate,omitzero"`
	Attachments  int       `json:"attachments"`
}

// MessagesResult answers "messages".
type MessagesResult struct {
	Operation string           `json:"operation"` // the provider operation used
	Messages  []MessageSummary `json:"messages"`
}

func (s *Server) messages(ctx context.Context, raw json.RawMessage) (any, error) {
	var a MessagesArgs
	if err := decodeArgs(raw, &a); err != nil {
		return nil, err
	}
	for _, f := range [][2]string{{"user", a.User}, {"folder", a.Folder}} {
		if err := required(f[0], f[1]); err != nil {
			return nil, err
		}
	}
	if a.Password == "" {
		return nil, errorf(CodeBadRequest, "args: password is required")
	}
	byDate := !a.Since.IsZero() || !a.Before.IsZero()
	n := 0
	for _, set := range []bool{byDate, a.Sender != "", a.Subject != "", a.All} {
		if set {
			n++
		}
	}
	if n != 1 {
		return nil, errorf(CodeBadRequest, "args: give exactly one of since/before, sender, subject, all")
	}
	auth := directapi.Authentication{Username: a.User, Password: a.Password}
	c := s.cfg.Client
	var op string
	var got []directapi.MessageDetail
	var err error
	switch {
	case byDate:
		begin, end := a.Since, a.Before
		if end.IsZero() {
			end = time.Now()
		}
		switch {
		case a.Full && a.UTC:
			op = "GetMessagesByReceivedDateUTC"
			got, err = c.GetMessagesByReceivedDateUTC(ctx, auth, a.Folder, begin, end)
		case a.Full:
			op = "GetMessagesByReceivedDate"
			got, err = c.GetMessagesByReceivedDate(ctx, auth, a.Folder, begin, end)
		case a.UTC:
			op = "SearchMessagesMetadataByReceivedDateUTC"
			got, err = c.SearchMessagesMetadataByReceivedDateUTC(ctx, auth, a.Folder, begin, end)
		default:
			op = "SearchMessagesMetadataByReceivedDate"
			got, err = c.SearchMessagesMetadataByReceivedDate(ctx, auth, a.Folder, begin, end)
		}
	case a.Sender != "":
		op = "GetMessagesBySender"
		got, err = c.GetMessagesBySender(ctx, auth, a.Folder, a.Sender)
	case a.Subject != "":
		op = "GetMessagesBySubject"
		got, err = c.GetMessagesBySubject(ctx, auth, a.Folder, a.Subject)
	case a.Full:
		op = "GetMessages"
		got, err = c.GetMessages(ctx, auth, a.Folder)
	default:
		op = "GetMessageMetaData"
		got, err = c.GetMessageMetaData(ctx, auth, a.Folder)
	}
	if err != nil {
		return nil, err
	}
	res := MessagesResult{Operation: op, Messages: []MessageSummary{}}
	for _, d := range got {
		res.Messages = append(res.Messages, MessageSummary{UID: d.UID, MessageID: d.MsgID, Sender: d.Sender,
			Recipients: len(d.Recipients), Size: d.Size, ReceivedDate: d.ReceivedDate.Time, Attachments: len(d.AttachmentList)})
	}
	return res, nil
}
