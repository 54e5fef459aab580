package sandbox

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"time"
	"unicode/utf8"

	"github.com/directbridge/directbridge/internal/readall"
	"github.com/directbridge/directbridge/upstream/directapi"
)

// HTTP conventions of the sandbox. The documents do not show which HTTP
// statuses the provider uses for failures, so the sandbox answers every
// application outcome (success or success=false with a code) with 200 and
// the documented envelope, and uses HTTP errors only where no operation
// could run: 400 for a body that is not JSON or not UTF-8, 413 for a body
// over the size limit, 404 for an unknown path, 405 for a known path with
// the wrong method, 500 for the sandbox's own failures. Those answers carry
// the envelope too (code 3 or 4 for messaging, "010" or "999" for registration).

type service int

const (
	messaging service = iota
	registration
)

// handlerFunc carries out one operation and returns its response.
type handlerFunc func(ctx context.Context, c *call) (any, error)

// call is one request as a handler sees it.
type call struct {
	r    *http.Request
	body []byte
	// stream is the unread body of an operation whose request is read
	// as it comes (streamedOps), within the body limit; body is nil.
	stream  io.Reader
	maxBody int64
}

// streamedOps are the operations whose request is read as it streams in
// rather than whole (rawsave.go): they carry whole messages. Their
// bodies are not kept for Requests.
var streamedOps = map[string]bool{"SaveRawMessages": true}

// param returns a decoded path parameter.
func (c *call) param(name string) string { return c.r.PathValue(name) }

// decode reads the JSON body into v, once. Unknown fields are ignored, as a
// tolerant provider would; a missing body or malformed JSON is a bad request.
func (c *call) decode(v any) error {
	if c.stream != nil {
		return c.decodeStream(v)
	}
	if len(bytes.TrimSpace(c.body)) == 0 {
		return &badBody{status: http.StatusBadRequest, msg: "request body missing"}
	}
	if err := json.Unmarshal(c.body, v); err != nil {
		return &badBody{status: http.StatusBadRequest, msg: "request body is not valid JSON: " + jsonProblem(err)}
	}
	// Decoded: a large body (a raw message's base64) need not be held
	// while the operation stores what was decoded from it.
	c.body = nil
	return nil
}

// decodeStream is decode for a request read as it streams in; its
// errors are those decode gives for the same body read whole.
func (c *call) decodeStream(v any) error {
	sd, ok := v.(streamDecoder)
	if !ok {
		return fmt.Errorf("sandbox: %T cannot be read as a stream", v)
	}
	counted := &countingReader{r: c.stream}
	err := sd.decodeStream(counted, c.r.ContentLength)
	c.stream = nil
	var mbe *http.MaxBytesError
	var se *streamSyntaxError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &mbe):
		return &badBody{status: http.StatusRequestEntityTooLarge,
			msg: fmt.Sprintf("request body larger than %d bytes", c.maxBody)}
	case errors.Is(err, errNotUTF8):
		return &badBody{status: http.StatusBadRequest, msg: "request body is not valid UTF-8"}
	case errors.Is(err, io.ErrUnexpectedEOF) && counted.n == 0:
		return &badBody{status: http.StatusBadRequest, msg: "request body missing"}
	case errors.Is(err, io.ErrUnexpectedEOF):
		return &badBody{status: http.StatusBadRequest, msg: "request body is not valid JSON: unexpected end"}
	case errors.As(err, &se):
		return &badBody{status: http.StatusBadRequest, msg: fmt.Sprintf("request body is not valid JSON: syntax error at byte %d", se.off)}
	default:
		var je *json.UnmarshalTypeError
		var jse *json.SyntaxError
		if errors.As(err, &je) || errors.As(err, &jse) {
			return &badBody{status: http.StatusBadRequest, msg: "request body is not valid JSON: " + jsonProblem(err)}
		}
		return &badBody{status: http.StatusBadRequest, msg: "request body could not be read"}
	}
}

// countingReader counts the bytes read through it.
type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

// jsonProblem describes a JSON error without echoing request content.
func jsonProblem(err error) string {
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case errors.As(err, &se):
		return fmt.Sprintf("syntax error at byte %d", se.Offset)
	case errors.As(err, &te):
		return fmt.Sprintf("field %q must be %s, not %s", te.Field, te.Type, te.Value)
	default:
		return "unreadable"
	}
}

func (s *Server) routes() *http.ServeMux {
	mux := http.NewServeMux()
	msg := func(method, path, op string, h handlerFunc) {
		mux.Handle(method+" "+directapi.MessagingPath+path, s.wrap(op, messaging, h))
	}
	msg("PUT", "/Send", "Send", s.handleSend)
	msg("PUT", "/SendWithHeader", "SendWithHeader", s.handleSendWithHeader)
	msg("PUT", "/Forward/{folder}", "Forward", s.handleForward)
	msg("POST", "/GetMessageStatus/{smtpId}", "GetMessageStatus", s.handleGetMessageStatus)
	msg("POST", "/GetMessageStatus/{$}", "GetMessageStatuses", s.handleGetMessageStatuses)
	msg("POST", "/GetMessageStatus", "GetMessageStatuses", s.handleGetMessageStatuses)
	msg("POST", "/GetMessageCount/{folder}", "GetMessageCount", s.handleGetMessageCount)
	msg("POST", "/GetUnreadMessageCount/{folder}", "GetUnreadMessageCount", s.handleGetUnreadMessageCount)
	msg("POST", "/GetDeletedMessageCount/{folder}", "GetDeletedMessageCount", s.handleGetDeletedMessageCount)
	msg("POST", "/GetMessagesByUIDs/{folder}", "GetMessagesByUIDs", s.handleGetMessagesByUIDs)
	msg("POST", "/GetUnreadMessages/{folder}", "GetUnreadMessages", s.handleGetUnreadMessages)
	msg("POST", "/GetMessagesByReceivedDate/{folder}/{begin}/{end}", "GetMessagesByReceivedDate", s.handleByReceivedDate(false, false))
	msg("POST", "/GetMessagesByReceivedDateUTC/{folder}/{begin}/{end}", "GetMessagesByReceivedDateUTC", s.handleByReceivedDate(true, false))
	msg("POST", "/GetMessagesBySender/{folder}/{sender}", "GetMessagesBySender", s.handleGetMessagesBySender)
	msg("POST", "/GetMessagesBySubject/{folder}/{subject}", "GetMessagesBySubject", s.handleGetMessagesBySubject)
	msg("POST", "/GetMessages/{folder}", "GetMessages", s.handleGetMessages)
	msg("POST", "/GetMessageMetaData/{folder}", "GetMessageMetaData", s.handleGetMessageMetaData)
	msg("POST", "/SearchMessagesMetadataByReceivedDate/{folder}/{begin}/{end}", "SearchMessagesMetadataByReceivedDate", s.handleByReceivedDate(false, true))
	msg("POST", "/SearchMessagesMetadataByReceivedDateUTC/{folder}/{begin}/{end}", "SearchMessagesMetadataByReceivedDateUTC", s.handleByReceivedDate(true, true))
	msg("POST", "/GetUIDs/{folder}", "GetUIDs", s.handleGetUIDs)
	msg("POST", "/GetFolders/{root}/{subscribedOnly}", "GetFolders", s.handleGetFolders)
	msg("POST", "/SetFoldersSubscribed/{$}", "SetFoldersSubscribed", s.handleSetFoldersSubscribed)
	msg("POST", "/SetFoldersSubscribed", "SetFoldersSubscribed", s.handleSetFoldersSubscribed)
	msg("POST", "/CreateFolder/{folder}", "CreateFolder", s.handleCreateFolder)
	msg("POST", "/MoveFolder/{folder}/{newFolder}", "MoveFolder", s.handleMoveFolder)
	msg("POST", "/DeleteFolder/{folder}", "DeleteFolder", s.handleDeleteFolder)
	msg("POST", "/CopyMessagesByUIDs/{folder}/{dest}", "CopyMessagesByUIDs", s.handleCopyMessages)
	msg("POST", "/MoveMessagesByUIDs/{folder}/{dest}", "MoveMessagesByUIDs", s.handleMoveMessages)
	msg("POST", "/DeleteMessagesByUIDs/{folder}/{deleteForever}", "DeleteMessagesByUIDs", s.handleDeleteMessages)
	msg("POST", "/MarkMessagesAsReadByUIDs/{folder}", "MarkMessagesAsReadByUIDs", s.handleMark(false))
	msg("POST", "/MarkMessagesAsUnreadByUIDs/{folder}", "MarkMessagesAsUnreadByUIDs", s.handleMark(true))
	msg("POST", "/GetRawMessagesByUIDs/{folder}", "GetRawMessagesByUIDs", s.handleGetRawMessages)
	msg("POST", "/SaveRawMessages/{folder}", "SaveRawMessages", s.handleSaveRawMessages)
	msg("PUT", "/SendWithTuser", "SendWithTuser", s.handleSendWithTuser)
	msg("PUT", "/SendWithHeaderWithTuser", "SendWithHeaderWithTuser", s.handleSendWithHeaderWithTuser)
	msg("POST", "/GetMessageStatusWithTuser/{smtpId}", "GetMessageStatusWithTuser", s.handleGetMessageStatusWithTuser)

	reg := func(method, path, op string, h handlerFunc) {
		mux.Handle(method+" "+directapi.RegistrationPath+path, s.wrap(op, registration, h))
	}
	reg("POST", "/login", "Login", s.handleLogin)
	reg("POST", "/ProvisionIDProofedPatient/{session}/{domain}", "ProvisionIDProofedPatient", s.handleProvision)
	reg("POST", "/GetPatientAddressByMeta/{session}/{domain}", "GetPatientAddressByMeta", s.handleAddressByMeta)
	reg("GET", "/GetPatientAddressByUsername/{session}/{domain}/{username}", "GetPatientAddressByUsername", s.handleAddressByUsername)
	reg("POST", "/SetPatientsPasswords/{session}/{domain}", "SetPatientsPasswords", s.handleSetPasswords)

	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) { s.unrouted(mux, w, r) })
	return mux
}

// unrouted answers a path no operation has: 405 when the path exists with
// another method, else 404; both with the service's envelope.
func (s *Server) unrouted(mux *http.ServeMux, w http.ResponseWriter, r *http.Request) {
	if !s.wait(r.Context(), s.Latency()) {
		return
	}
	status, text := http.StatusNotFound, "no such operation"
	for _, m := range []string{"GET", "POST", "PUT"} {
		if m == r.Method {
			continue
		}
		probe := r.Clone(r.Context())
		probe.Method = m
		if _, pattern := mux.Handler(probe); pattern != "/" && pattern != "" {
			status, text = http.StatusMethodNotAllowed, "method "+r.Method+" not allowed; use "+m
			w.Header().Set("Allow", m)
			break
		}
	}
	if bytes.HasPrefix([]byte(r.URL.Path), []byte(directapi.RegistrationPath)) {
		writeJSON(w, status, directapi.ResellerAPIResponseType{Code: directapi.RegCodeInvalidArgument, ErrorMessage: text})
		return
	}
	writeJSON(w, status, directapi.APIResponse{Code: CodeBadRequest, Message: text})
}

// wrap adds to a handler what every operation shares: the body limit and
// checks, counting, recording, fault injection, the error envelope and a
// log line (operation, status, duration; never bodies or paths, which hold
// addresses, subjects and session ids).
func (s *Server) wrap(op string, svc service, h handlerFunc) http.Handler {
	envelope := func(code int) any {
		return directapi.APIResponse{Code: code, Message: "injected fault"}
	}
	regEnv := func(code string) any {
		return directapi.ResellerAPIResponseType{Code: code, ErrorMessage: "injected fault"}
	}
	if svc == registration {
		envelope = func(int) any { return regEnv(directapi.RegCodeOther) }
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		var body []byte
		var stream io.Reader
		var readErr error
		if streamedOps[op] {
			stream = http.MaxBytesReader(w, r.Body, s.maxBody)
		} else {
			body, readErr = s.readBody(w, r)
		}
		fault := s.hooks.record(op, body)
		ctx := r.Context()
		if fault != nil && fault.Late {
			ctx = context.WithoutCancel(ctx) // processed whatever the client does
		}
		if fault != nil && !pause(ctx, fault.Latency) {
			return
		}
		// Half the added latency before the operation, half after it (latency.go).
		latency := s.Latency()
		if !s.wait(r.Context(), latency/2) {
			return
		}
		if fault != nil && !fault.After && fault.fails() {
			if stream != nil {
				// Read what the client sends before answering: a client
				// still writing its request may miss an early answer.
				io.Copy(io.Discard, stream)
			}
			if s.wait(r.Context(), latency-latency/2) {
				fault.apply(w, envelope, regEnv)
			}
			return
		}
		var resp any
		status := http.StatusOK
		err := readErr
		if err == nil {
			resp, err = h(ctx, &call{r: r, body: body, stream: stream, maxBody: s.maxBody})
		}
		if err != nil {
			if svc == registration {
				status, resp = regEnvelope(err)
			} else {
				status, resp = msgEnvelope(err)
			}
			if status >= 500 {
				s.log.Error("sandbox operation failed", "op", op, "err", err)
			}
		}
		if !s.wait(r.Context(), latency-latency/2) {
			return
		}
		if fault != nil && fault.After && fault.apply(w, envelope, regEnv) {
			return
		}
		writeJSON(w, status, resp)
		s.log.LogAttrs(r.Context(), slog.LevelDebug, "sandbox request", slog.String("op", op),
			slog.Int("status", status), slog.Duration("duration", time.Since(start)))
	})
}

// readBody reads the whole body within the size limit and checks it is
// UTF-8 (RFC 8259 §8.1); encoding/json would otherwise replace bad bytes
// silently and store something other than what was sent.
func (s *Server) readBody(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	body, err := readall.Sized(http.MaxBytesReader(w, r.Body, s.maxBody), r.ContentLength, s.maxBody)
	var mbe *http.MaxBytesError
	switch {
	case errors.As(err, &mbe):
		return nil, &badBody{status: http.StatusRequestEntityTooLarge,
			msg: fmt.Sprintf("request body larger than %d bytes", s.maxBody)}
	case err != nil:
		return nil, &badBody{status: http.StatusBadRequest, msg: "request body could not be read"}
	case !utf8.Valid(body):
		return nil, &badBody{status: http.StatusBadRequest, msg: "request body is not valid UTF-8"}
	}
	return body, nil
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	enc.Encode(v)
}
