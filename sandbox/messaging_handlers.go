package sandbox

import (
	"context"
	"encoding/base64"
	"strconv"
	"strings"
	"time"

	"github.com/directbridge/directbridge/internal/sqlstmt"
	"github.com/directbridge/directbridge/upstream/directapi"
)

// This file holds the 34 messaging operations (messaging-rest.md,
// "Endpoints"). Each decodes its documented request type, authenticates,
// and runs in one transaction.

// withUser decodes the request into req, authenticates the credentials
// that auth returns from it, and runs fn in one transaction.
func withUser[T any](s *Server, ctx context.Context, c *call, auth func(*T) directapi.Authentication, fn func(tx *sqlstmt.Tx, u user, req *T) (any, error)) (any, error) {
	var req T
	if err := c.decode(&req); err != nil {
		return nil, err
	}
	var resp any
	err := s.tx(ctx, func(tx *sqlstmt.Tx) error {
		a := auth(&req)
		u, err := s.authenticate(tx, a.Username, a.Password)
		if err != nil {
			return err
		}
		resp, err = fn(tx, u, &req)
		return err
	})
	return resp, err
}

func plainAuth(a *directapi.Authentication) directapi.Authentication { return *a }
func uidsAuth(r *directapi.UidsRequestType) directapi.Authentication { return r.Auth }

// inFolder resolves the {folder} path parameter.
func inFolder(tx *sqlstmt.Tx, u user, c *call) (int64, string, error) {
	name := c.param("folder")
	if err := validateFolderName(name); err != nil {
		return 0, "", err
	}
	id, err := folderID(tx, u, name)
	return id, name, err
}

func sendResponse(id string) directapi.SendMessageResponseType {
	return directapi.SendMessageResponseType{APIResponse: ok(), SmtpID: id}
}

func (s *Server) handleSend(ctx context.Context, c *call) (any, error) {
	return withUser(s, ctx, c, func(r *directapi.SendRequest) directapi.Authentication { return r.Authentication },
		func(tx *sqlstmt.Tx, u user, r *directapi.SendRequest) (any, error) {
			id, err := s.send(tx, u, outgoing{msg: r.Message})
			return sendResponse(id), err
		})
}

func (s *Server) handleSendWithHeader(ctx context.Context, c *call) (any, error) {
	return withUser(s, ctx, c, func(r *directapi.SendRequestWithHeader) directapi.Authentication { return r.Authentication },
		func(tx *sqlstmt.Tx, u user, r *directapi.SendRequestWithHeader) (any, error) {
			id, err := s.send(tx, u, outgoing{msg: r.Message.Message, headers: r.Message.Headers})
			return sendResponse(id), err
		})
}

// withTuser is withUser for the ...WithTuser operations: the credentials
// are a T-user's, and the acting mailbox is directAddr.
func withTuser[T any](s *Server, ctx context.Context, c *call, auth func(*T) directapi.AuthenticationWithTuser, fn func(tx *sqlstmt.Tx, u user, req *T) (any, error)) (any, error) {
	var req T
	if err := c.decode(&req); err != nil {
		return nil, err
	}
	var resp any
	err := s.tx(ctx, func(tx *sqlstmt.Tx) error {
		u, err := s.authenticateTuser(tx, auth(&req))
		if err != nil {
			return err
		}
		resp, err = fn(tx, u, &req)
		return err
	})
	return resp, err
}

func (s *Server) handleSendWithTuser(ctx context.Context, c *call) (any, error) {
	return withTuser(s, ctx, c, func(r *directapi.SendWithTuserRequest) directapi.AuthenticationWithTuser { return r.Authentication },
		func(tx *sqlstmt.Tx, u user, r *directapi.SendWithTuserRequest) (any, error) {
			id, err := s.send(tx, u, outgoing{msg: r.Message})
			return sendResponse(id), err
		})
}

func (s *Server) handleSendWithHeaderWithTuser(ctx context.Context, c *call) (any, error) {
	return withTuser(s, ctx, c, func(r *directapi.SendWithHeaderWithTuserRequest) directapi.AuthenticationWithTuser {
		return r.Authentication
	}, func(tx *sqlstmt.Tx, u user, r *directapi.SendWithHeaderWithTuserRequest) (any, error) {
		id, err := s.send(tx, u, outgoing{msg: r.Message.Message, headers: r.Message.Headers})
		return sendResponse(id), err
	})
}

// handleForward forwards messages to the recipients of the request.
// UidsRequestType's recipients field is "not shown"; the sandbox accepts a
// Recipient array or an object wrapping one (directapi.RecipientCollection).
func (s *Server) handleForward(ctx context.Context, c *call) (any, error) {
	return withUser(s, ctx, c, uidsAuth, func(tx *sqlstmt.Tx, u user, r *directapi.UidsRequestType) (any, error) {
		fid, folder, err := inFolder(tx, u, c)
		if err != nil {
			return nil, err
		}
		if err := requireUIDs(tx, fid, r.UIDs); err != nil {
			return nil, err
		}
		ms, err := loadMessages(tx, fid, msgFilter{uids: r.UIDs, withRaw: true})
		if err != nil {
			return nil, err
		}
		id, err := s.send(tx, u, forwardMessage(u, folder, ms, r.Recipients))
		return sendResponse(id), err
	})
}

func (s *Server) handleGetMessageStatus(ctx context.Context, c *call) (any, error) {
	return withUser(s, ctx, c, plainAuth, func(tx *sqlstmt.Tx, u user, _ *directapi.Authentication) (any, error) {
		return s.statusReport(tx, u, []string{c.param("smtpId")})
	})
}

func (s *Server) handleGetMessageStatuses(ctx context.Context, c *call) (any, error) {
	return withUser(s, ctx, c, func(r *directapi.SmtpIdsRequestType) directapi.Authentication { return r.Auth },
		func(tx *sqlstmt.Tx, u user, r *directapi.SmtpIdsRequestType) (any, error) {
			if len(r.SmtpIDs) == 0 {
				return nil, errInvalid("smtpIds missing")
			}
			return s.statusReport(tx, u, r.SmtpIDs)
		})
}

func (s *Server) handleGetMessageStatusWithTuser(ctx context.Context, c *call) (any, error) {
	return withTuser(s, ctx, c, func(a *directapi.AuthenticationWithTuser) directapi.AuthenticationWithTuser { return *a },
		func(tx *sqlstmt.Tx, u user, _ *directapi.AuthenticationWithTuser) (any, error) {
			return s.statusReport(tx, u, []string{c.param("smtpId")})
		})
}

func (s *Server) handleCount(which string) handlerFunc {
	return func(ctx context.Context, c *call) (any, error) {
		return withUser(s, ctx, c, plainAuth, func(tx *sqlstmt.Tx, u user, _ *directapi.Authentication) (any, error) {
			n, err := countMessages(tx, u, c.param("folder"), which)
			return directapi.GetCountResponse{APIResponse: ok(), Count: n}, err
		})
	}
}

func (s *Server) handleGetMessageCount(ctx context.Context, c *call) (any, error) {
	return s.handleCount("all")(ctx, c)
}

func (s *Server) handleGetUnreadMessageCount(ctx context.Context, c *call) (any, error) {
	return s.handleCount("unread")(ctx, c)
}

func (s *Server) handleGetDeletedMessageCount(ctx context.Context, c *call) (any, error) {
	return s.handleCount("deleted")(ctx, c)
}

// listing answers an operation that returns messages of {folder}.
func listing[T any](s *Server, ctx context.Context, c *call, auth func(*T) directapi.Authentication, full bool, filter func(*T) (msgFilter, error)) (any, error) {
	return withUser(s, ctx, c, auth, func(tx *sqlstmt.Tx, u user, r *T) (any, error) {
		fid, folder, err := inFolder(tx, u, c)
		if err != nil {
			return nil, err
		}
		f, err := filter(r)
		if err != nil {
			return nil, err
		}
		f.withRaw, f.numbered = true, true
		ms, err := loadMessages(tx, fid, f)
		if err != nil {
			return nil, err
		}
		return directapi.GetMessageResponse{APIResponse: ok(), Messages: details(folder, ms, full)}, nil
	})
}

func noFilter(*directapi.Authentication) (msgFilter, error) { return msgFilter{}, nil }

// handleGetMessagesByUIDs returns the messages that exist among the UIDs;
// unknown UIDs are left out, as IMAP FETCH leaves out expunged ones.
func (s *Server) handleGetMessagesByUIDs(ctx context.Context, c *call) (any, error) {
	return listing(s, ctx, c, uidsAuth, true, func(r *directapi.UidsRequestType) (msgFilter, error) {
		if len(r.UIDs) == 0 {
			return msgFilter{}, errInvalid("uids missing")
		}
		return msgFilter{uids: r.UIDs}, nil
	})
}

func (s *Server) handleGetUnreadMessages(ctx context.Context, c *call) (any, error) {
	return listing(s, ctx, c, plainAuth, true, func(*directapi.Authentication) (msgFilter, error) {
		return msgFilter{unreadOnly: true}, nil
	})
}

func (s *Server) handleGetMessages(ctx context.Context, c *call) (any, error) {
	return listing(s, ctx, c, plainAuth, true, noFilter)
}

func (s *Server) handleGetMessageMetaData(ctx context.Context, c *call) (any, error) {
	return listing(s, ctx, c, plainAuth, false, noFilter)
}

// handleGetMessagesBySender matches the sender as a case-insensitive
// substring of the From header (address or display name), as IMAP SEARCH
// FROM does (RFC 9051 §6.4.4).
func (s *Server) handleGetMessagesBySender(ctx context.Context, c *call) (any, error) {
	return listing(s, ctx, c, plainAuth, true, func(*directapi.Authentication) (msgFilter, error) {
		return msgFilter{sender: c.param("sender")}, nil
	})
}

// handleGetMessagesBySubject matches a case-insensitive substring of the
// decoded subject.
func (s *Server) handleGetMessagesBySubject(ctx context.Context, c *call) (any, error) {
	return listing(s, ctx, c, plainAuth, true, func(*directapi.Authentication) (msgFilter, error) {
		return msgFilter{subject: c.param("subject")}, nil
	})
}

// handleByReceivedDate serves the four received-date operations. Both ends
// of the range are inclusive; utc selects yyyyMMddHHmmss (UTC) instead of
// epoch milliseconds; meta leaves out bodies and attachments.
func (s *Server) handleByReceivedDate(utc, meta bool) handlerFunc {
	return func(ctx context.Context, c *call) (any, error) {
		return listing(s, ctx, c, plainAuth, !meta, func(*directapi.Authentication) (msgFilter, error) {
			begin, err := parseTimeParam(c.param("begin"), utc)
			if err != nil {
				return msgFilter{}, err
			}
			end, err := parseTimeParam(c.param("end"), utc)
			if err != nil {
				return msgFilter{}, err
			}
			if end.Before(begin) {
				return msgFilter{}, errInvalid("endTime is before beginTime")
			}
			return msgFilter{dated: true, from: begin.UnixMilli(), to: end.UnixMilli()}, nil
		})
	}
}

func parseTimeParam(v string, utc bool) (time.Time, error) {
	if utc {
		t, err := time.ParseInLocation(directapi.UTCLayout, v, time.UTC)
		if err != nil {
			return time.Time{}, errInvalid("time %q is not yyyyMMddHHmmss", v)
		}
		return t, nil
	}
	ms, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return time.Time{}, errInvalid("time %q is not epoch milliseconds", v)
	}
	return time.UnixMilli(ms), nil
}

func (s *Server) handleGetUIDs(ctx context.Context, c *call) (any, error) {
	return withUser(s, ctx, c, plainAuth, func(tx *sqlstmt.Tx, u user, _ *directapi.Authentication) (any, error) {
		fid, _, err := inFolder(tx, u, c)
		if err != nil {
			return nil, err
		}
		uids, err := uidsOf(tx, fid)
		return directapi.GetUIDResponseType{APIResponse: ok(), UIDs: uids}, err
	})
}

// handleGetFolders lists every sub-folder of {root} at all levels, sorted,
// without root itself. subscribedFolderOnly is "not shown" in format; the
// sandbox takes true/false in any case, and 1/0, yes/no.
func (s *Server) handleGetFolders(ctx context.Context, c *call) (any, error) {
	return withUser(s, ctx, c, plainAuth, func(tx *sqlstmt.Tx, u user, _ *directapi.Authentication) (any, error) {
		only, err := parseBoolParam("subscribedFolderOnly", c.param("subscribedOnly"))
		if err != nil {
			return nil, err
		}
		names, err := listFolders(tx, u, c.param("root"), only, s.childrenOnly)
		return directapi.GetFoldersResponseType{APIResponse: ok(), Folders: names}, err
	})
}

func parseBoolParam(name, v string) (bool, error) {
	switch strings.ToLower(v) {
	case "true", "1", "yes":
		return true, nil
	case "false", "0", "no":
		return false, nil
	}
	return false, errInvalid("%s must be true or false", name)
}

// handleSetFoldersSubscribed answers with every subscribed folder after the
// change (the document gives the response type, not its content).
func (s *Server) handleSetFoldersSubscribed(ctx context.Context, c *call) (any, error) {
	return withUser(s, ctx, c, func(r *directapi.SetFoldersSubscribedRequestType) directapi.Authentication { return r.Auth },
		func(tx *sqlstmt.Tx, u user, r *directapi.SetFoldersSubscribedRequestType) (any, error) {
			names, err := setSubscribed(tx, u, r.Folders, r.Subscribed)
			return directapi.GetFoldersResponseType{APIResponse: ok(), Folders: names}, err
		})
}

func (s *Server) handleCreateFolder(ctx context.Context, c *call) (any, error) {
	return withUser(s, ctx, c, plainAuth, func(tx *sqlstmt.Tx, u user, _ *directapi.Authentication) (any, error) {
		return ok(), createFolder(tx, u, c.param("folder"))
	})
}

func (s *Server) handleMoveFolder(ctx context.Context, c *call) (any, error) {
	return withUser(s, ctx, c, plainAuth, func(tx *sqlstmt.Tx, u user, _ *directapi.Authentication) (any, error) {
		return ok(), moveFolder(tx, u, c.param("folder"), c.param("newFolder"))
	})
}

func (s *Server) handleDeleteFolder(ctx context.Context, c *call) (any, error) {
	return withUser(s, ctx, c, plainAuth, func(tx *sqlstmt.Tx, u user, _ *directapi.Authentication) (any, error) {
		return ok(), deleteFolder(tx, u, c.param("folder"))
	})
}

// copyOrMove serves Copy and Move. Copying into the same folder duplicates
// the messages, as IMAP COPY does; moving into the same folder is refused.
func (s *Server) copyOrMove(ctx context.Context, c *call, move bool) (any, error) {
	return withUser(s, ctx, c, uidsAuth, func(tx *sqlstmt.Tx, u user, r *directapi.UidsRequestType) (any, error) {
		src, folder, err := inFolder(tx, u, c)
		if err != nil {
			return nil, err
		}
		destName := c.param("dest")
		if err := validateFolderName(destName); err != nil {
			return nil, err
		}
		if move && destName == folder {
			return nil, errInvalid("source and destination folder are the same")
		}
		dest, err := folderID(tx, u, destName)
		if err != nil {
			return nil, err
		}
		return ok(), copyMessages(tx, src, dest, r.UIDs, move, "")
	})
}

func (s *Server) handleCopyMessages(ctx context.Context, c *call) (any, error) {
	return s.copyOrMove(ctx, c, false)
}

func (s *Server) handleMoveMessages(ctx context.Context, c *call) (any, error) {
	return s.copyOrMove(ctx, c, true)
}

func (s *Server) handleDeleteMessages(ctx context.Context, c *call) (any, error) {
	return withUser(s, ctx, c, uidsAuth, func(tx *sqlstmt.Tx, u user, r *directapi.UidsRequestType) (any, error) {
		forever, err := parseBoolParam("deleteForever", c.param("deleteForever"))
		if err != nil {
			return nil, err
		}
		name := c.param("folder")
		if err := validateFolderName(name); err != nil {
			return nil, err
		}
		return ok(), deleteMessages(tx, u, name, r.UIDs, forever)
	})
}

// handleMark serves MarkMessagesAsRead/UnreadByUIDs. The request body of
// the unread operation is "not shown"; the sandbox takes UidsRequestType
// for both.
func (s *Server) handleMark(unread bool) handlerFunc {
	return func(ctx context.Context, c *call) (any, error) {
		return withUser(s, ctx, c, uidsAuth, func(tx *sqlstmt.Tx, u user, r *directapi.UidsRequestType) (any, error) {
			fid, _, err := inFolder(tx, u, c)
			if err != nil {
				return nil, err
			}
			return ok(), markMessages(tx, fid, r.UIDs, unread)
		})
	}
}

// handleGetRawMessages returns the stored bytes, base64 encoded, of the
// UIDs that exist. Its request body is "not shown"; the sandbox takes
// UidsRequestType.
func (s *Server) handleGetRawMessages(ctx context.Context, c *call) (any, error) {
	return withUser(s, ctx, c, uidsAuth, func(tx *sqlstmt.Tx, u user, r *directapi.UidsRequestType) (any, error) {
		fid, folder, err := inFolder(tx, u, c)
		if err != nil {
			return nil, err
		}
		if len(r.UIDs) == 0 {
			return nil, errInvalid("uids missing")
		}
		ms, err := loadMessages(tx, fid, msgFilter{uids: r.UIDs, withRaw: true})
		if err != nil {
			return nil, err
		}
		out := make([]directapi.RawMessage, 0, len(ms))
		for _, m := range ms {
			d := detail(folder, m, false)
			out = append(out, directapi.RawMessage{UID: m.uid, MsgID: d.MsgID, Folder: folder, Data: base64.StdEncoding.EncodeToString(m.raw)})
		}
		return directapi.GetRawMessageResponse{APIResponse: ok(), Messages: out}, nil
	})
}

// handleSaveRawMessages appends each raw message to {folder} under a new
// UID, unread, received now; what the operation does is "not shown", and
// this is what IMAP APPEND without flags does (RFC 9051 §6.3.12). The
// answer carries no UIDs. A message whose data is empty or not base64
// fails the whole request.
func (s *Server) handleSaveRawMessages(ctx context.Context, c *call) (any, error) {
	return withUser(s, ctx, c, func(r *rawSaveRequest) directapi.Authentication { return r.Auth },
		func(tx *sqlstmt.Tx, u user, r *rawSaveRequest) (any, error) {
			fid, _, err := inFolder(tx, u, c)
			if err != nil {
				return nil, err
			}
			if len(r.Messages) == 0 {
				return nil, errInvalid("messages missing")
			}
			now := s.now()
			for i, m := range r.Messages {
				raw := []byte(m.Data)
				if len(raw) == 0 {
					return nil, errInvalid("message %d: data is empty or not base64", i+1)
				}
				if _, err := insertMessage(tx, fid, raw, true, now, ""); err != nil {
					return nil, err
				}
			}
			return ok(), nil
		})
}
