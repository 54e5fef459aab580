package restclient

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/directbridge/directbridge/upstream/directapi"
)

var sevenUIDs = []int64{1, 2, 3, 4, 5, 6, 7}

// uidBatches decodes the uids of every recorded UidsRequestType.
func uidBatches(t *testing.T, reqs []recordedRequest) [][]int64 {
	t.Helper()
	var out [][]int64
	for _, r := range reqs {
		var body directapi.UidsRequestType
		if err := json.Unmarshal(r.Body, &body); err != nil {
			t.Fatalf("request body %s: %v", r.Body, err)
		}
		if body.Auth.Username != gAuth.Username || body.Auth.Password != gAuth.Password {
			t.Errorf("batch without the credentials: %s", r.Body)
		}
		out = append(out, body.UIDs)
	}
	return out
}

var wantSevenBatches = [][]int64{{1, 2, 3}, {4, 5, 6}, {7}}

func newBatchClient(t *testing.T) (*recorder, *Client) {
	rec := newRecorder(t)
	return rec, newTestClient(t, rec.srv.URL, newFakeClock(), func(o *Options) { o.BatchSize = 3 })
}

func TestBatchGetMessagesByUIDs(t *testing.T) {
	rec, c := newBatchClient(t)
	// The server answers one message per requested UID.
	rec.respond = func(_ int, _ *http.Request, body []byte) (int, string) {
		var req directapi.UidsRequestType
		json.Unmarshal(body, &req)
		var msgs []string
		for _, uid := range req.UIDs {
			msgs = append(msgs, fmt.Sprintf(`{"uid":%d,"subject":"m%d","sender":"a@x","htmlBody":false,"recipients":[]}`, uid, uid))
		}
		return 200, `{"success":true,"code":0,"message":"OK","messages":[` + strings.Join(msgs, ",") + `]}`
	}
	msgs, err := c.GetMessagesByUIDs(context.Background(), gAuth, "INBOX", sevenUIDs)
	if err != nil {
		t.Fatal(err)
	}
	reqs := rec.requests()
	if got := uidBatches(t, reqs); !reflect.DeepEqual(got, wantSevenBatches) {
		t.Fatalf("batches %v; want %v", got, wantSevenBatches)
	}
	for _, r := range reqs {
		if r.RequestURI != msgPrefix+"/GetMessagesByUIDs/INBOX" || r.Method != "POST" {
			t.Errorf("batch request %s %s", r.Method, r.RequestURI)
		}
	}
	var got []int64
	for _, m := range msgs {
		got = append(got, m.UID)
		if m.Subject != fmt.Sprintf("m%d", m.UID) {
			t.Errorf("message %d subject %q", m.UID, m.Subject)
		}
	}
	if !slices.Equal(got, sevenUIDs) {
		t.Fatalf("merged UIDs %v; want %v in order", got, sevenUIDs)
	}
}

func TestBatchGetRawMessagesByUIDs(t *testing.T) {
	rec, c := newBatchClient(t)
	rec.respond = func(_ int, _ *http.Request, body []byte) (int, string) {
		var req directapi.UidsRequestType
		json.Unmarshal(body, &req)
		var msgs []string
		for _, uid := range req.UIDs {
			raw := directapi.NewRawMessage([]byte(fmt.Sprintf("Subject: %d\r\n\r\nbody %d\r\n", uid, uid)))
			msgs = append(msgs, fmt.Sprintf(`{"uid":%d,"folder":"INBOX","data":%q}`, uid, raw.Data))
		}
		return 200, `{"success":true,"code":0,"message":"OK","messages":[` + strings.Join(msgs, ",") + `]}`
	}
	raws, err := c.GetRawMessagesByUIDs(context.Background(), gAuth, "INBOX", sevenUIDs)
	if err != nil {
		t.Fatal(err)
	}
	if got := uidBatches(t, rec.requests()); !reflect.DeepEqual(got, wantSevenBatches) {
		t.Fatalf("batches %v; want %v", got, wantSevenBatches)
	}
	if len(raws) != 7 {
		t.Fatalf("%d raw messages; want 7", len(raws))
	}
	for i, r := range raws {
		b, err := r.Bytes()
		if err != nil || r.UID != sevenUIDs[i] || string(b) != fmt.Sprintf("Subject: %d\r\n\r\nbody %d\r\n", r.UID, r.UID) {
			t.Errorf("raw message %d = %+v %q %v", i, r, b, err)
		}
	}
}

func TestBatchEmptyMakesNoRequest(t *testing.T) {
	rec, c := newBatchClient(t)
	ctx := context.Background()
	for name, call := range map[string]func() error{
		"MarkMessagesAsReadByUIDs":   func() error { return c.MarkMessagesAsReadByUIDs(ctx, gAuth, "INBOX", []int64{}) },
		"MarkMessagesAsUnreadByUIDs": func() error { return c.MarkMessagesAsUnreadByUIDs(ctx, gAuth, "INBOX", nil) },
		"CopyMessagesByUIDs":         func() error { return c.CopyMessagesByUIDs(ctx, gAuth, "INBOX", "INBOX.A", nil) },
		"MoveMessagesByUIDs":         func() error { return c.MoveMessagesByUIDs(ctx, gAuth, "INBOX", "INBOX.A", []int64{}) },
		"DeleteMessagesByUIDs":       func() error { return c.DeleteMessagesByUIDs(ctx, gAuth, "INBOX", nil, true) },
		"SaveRawMessages":            func() error { return c.SaveRawMessages(ctx, gAuth, "INBOX", nil) },
		"GetMessagesByUIDs": func() error {
			msgs, err := c.GetMessagesByUIDs(ctx, gAuth, "INBOX", []int64{})
			if len(msgs) != 0 {
				return fmt.Errorf("%d messages", len(msgs))
			}
			return err
		},
		"GetRawMessagesByUIDs": func() error {
			raws, err := c.GetRawMessagesByUIDs(ctx, gAuth, "INBOX", nil)
			if len(raws) != 0 {
				return fmt.Errorf("%d messages", len(raws))
			}
			return err
		},
		"GetMessageStatuses": func() error {
			logs, err := c.GetMessageStatuses(ctx, gAuth, nil)
			if len(logs) != 0 {
				return fmt.Errorf("%d logs", len(logs))
			}
			return err
		},
	} {
		if err := call(); err != nil {
			t.Errorf("%s with nothing: %v", name, err)
		}
	}
	if n := len(rec.requests()); n != 0 {
		t.Fatalf("%d requests for empty lists; want none", n)
	}
}

func TestBatchPartialFailure(t *testing.T) {
	failOn := func(n int) func(int, *http.Request, []byte) (int, string) {
		return func(i int, _ *http.Request, _ []byte) (int, string) {
			if i == n {
				return 200, `{"success":false,"code":3,"message":"destination folder does not exist"}`
			}
			return 200, plain
		}
	}
	ctx := context.Background()

	t.Run("MoveMessagesByUIDs second batch fails", func(t *testing.T) {
		rec, c := newBatchClient(t)
		rec.respond = failOn(1)
		err := c.MoveMessagesByUIDs(ctx, gAuth, "INBOX", "INBOX.Archive", sevenUIDs)
		var pe *PartialError
		if !errors.As(err, &pe) || pe.Done != 3 || pe.Op != "MoveMessagesByUIDs" {
			t.Fatalf("err = %#v; want a PartialError with Done 3", err)
		}
		var ae *APIError
		if !errors.As(err, &ae) || ae.Code != 3 {
			t.Fatalf("cause %v; want the APIError code 3", errors.Unwrap(err))
		}
		if got := uidBatches(t, rec.requests()); !reflect.DeepEqual(got, wantSevenBatches[:2]) {
			t.Fatalf("batches %v; want the first two only (no request after the failure)", got)
		}
	})
	t.Run("first batch fails: plain error", func(t *testing.T) {
		rec, c := newBatchClient(t)
		rec.respond = failOn(0)
		err := c.CopyMessagesByUIDs(ctx, gAuth, "INBOX", "INBOX.Archive", sevenUIDs)
		var pe *PartialError
		if errors.As(err, &pe) {
			t.Fatalf("err = %v; nothing was done, so no PartialError", err)
		}
		if !IsAPIError(err) || len(rec.requests()) != 1 {
			t.Fatalf("err = %v after %d requests", err, len(rec.requests()))
		}
	})
	t.Run("DeleteMessagesByUIDs last batch fails", func(t *testing.T) {
		rec, c := newBatchClient(t)
		rec.respond = failOn(2)
		err := c.DeleteMessagesByUIDs(ctx, gAuth, "INBOX", sevenUIDs, false)
		var pe *PartialError
		if !errors.As(err, &pe) || pe.Done != 6 {
			t.Fatalf("err = %#v; want Done 6", err)
		}
		for _, r := range rec.requests() {
			if r.RequestURI != msgPrefix+"/DeleteMessagesByUIDs/INBOX/false" {
				t.Errorf("request to %s", r.RequestURI)
			}
		}
	})
	t.Run("temporary failure in a later batch keeps its class", func(t *testing.T) {
		rec, c := newBatchClient(t)
		rec.respond = func(i int, _ *http.Request, _ []byte) (int, string) {
			if i == 1 {
				return 500, ""
			}
			return 200, plain
		}
		err := c.MoveMessagesByUIDs(ctx, gAuth, "INBOX", "INBOX.Archive", sevenUIDs)
		var pe *PartialError
		if !errors.As(err, &pe) || pe.Done != 3 || !OutcomeUnknown(err) || !IsTemporary(err) {
			t.Fatalf("err = %#v", err)
		}
		if n := len(rec.requests()); n != 2 {
			t.Fatalf("%d requests; the failed move batch must not be repeated", n)
		}
	})
	t.Run("repeatable marking", func(t *testing.T) {
		rec, c := newBatchClient(t)
		if err := c.MarkMessagesAsReadByUIDs(ctx, gAuth, "INBOX", sevenUIDs); err != nil {
			t.Fatal(err)
		}
		if got := uidBatches(t, rec.requests()); !reflect.DeepEqual(got, wantSevenBatches) {
			t.Fatalf("batches %v", got)
		}
	})
	t.Run("read-side batch failure returns no partial results", func(t *testing.T) {
		rec, c := newBatchClient(t)
		rec.respond = func(i int, _ *http.Request, _ []byte) (int, string) {
			if i == 1 {
				return 200, `{"success":false,"code":3,"message":"x"}`
			}
			return 200, `{"success":true,"code":0,"message":"OK","messages":[{"uid":1}]}`
		}
		msgs, err := c.GetMessagesByUIDs(ctx, gAuth, "INBOX", sevenUIDs)
		if !IsAPIError(err) || msgs != nil {
			t.Fatalf("GetMessagesByUIDs = %v, %v", msgs, err)
		}
	})
}

func TestBatchGetMessageStatuses(t *testing.T) {
	rec, c := newBatchClient(t)
	ids := []string{"<1@x>", "<2@x>", "<3@x>", "<4@x>", "<5@x>", "<6@x>", "<7@x>"}
	rec.respond = func(_ int, _ *http.Request, body []byte) (int, string) {
		var req directapi.SmtpIdsRequestType
		json.Unmarshal(body, &req)
		var logs []string
		for _, id := range req.SmtpIDs {
			logs = append(logs, fmt.Sprintf(`{"from":"a@x","to":"b@y","messageId":%q,"messageSize":1,"status":"Delivered","ts":1709294400000}`, id))
		}
		return 200, `{"success":true,"code":0,"message":"OK","hasCvData":false,"messageLogs":[` + strings.Join(logs, ",") + `]}`
	}
	logs, err := c.GetMessageStatuses(context.Background(), gAuth, ids)
	if err != nil {
		t.Fatal(err)
	}
	var batches [][]string
	for _, r := range rec.requests() {
		if r.RequestURI != msgPrefix+"/GetMessageStatus/" {
			t.Errorf("request to %s", r.RequestURI)
		}
		var req directapi.SmtpIdsRequestType
		if err := json.Unmarshal(r.Body, &req); err != nil {
			t.Fatal(err)
		}
		batches = append(batches, req.SmtpIDs)
	}
	want := [][]string{ids[0:3], ids[3:6], ids[6:]}
	if !reflect.DeepEqual(batches, want) {
		t.Fatalf("smtpId batches %v; want %v", batches, want)
	}
	var got []string
	for _, l := range logs {
		got = append(got, l.MessageID)
	}
	if !slices.Equal(got, ids) {
		t.Fatalf("merged logs %v; want %v", got, ids)
	}
}

func TestBatchSaveRawMessages(t *testing.T) {
	rec, c := newBatchClient(t)
	var msgs []directapi.RawMessage
	for i := range 7 {
		msgs = append(msgs, directapi.NewRawMessage([]byte(fmt.Sprintf("Subject: %d\r\n\r\n", i))))
	}
	if err := c.SaveRawMessages(context.Background(), gAuth, "INBOX.Drafts", msgs); err != nil {
		t.Fatal(err)
	}
	var sizes []int
	var all []directapi.RawMessage
	for _, r := range rec.requests() {
		var req directapi.RawMessagesRequestType
		if err := json.Unmarshal(r.Body, &req); err != nil {
			t.Fatal(err)
		}
		sizes = append(sizes, len(req.Messages))
		all = append(all, req.Messages...)
	}
	if !slices.Equal(sizes, []int{3, 3, 1}) {
		t.Fatalf("batch sizes %v; want [3 3 1]", sizes)
	}
	if !reflect.DeepEqual(all, msgs) {
		t.Fatalf("messages sent %v; want %v in order", all, msgs)
	}

	// A failure in the third batch reports six saved.
	rec.reset()
	rec.respond = func(i int, _ *http.Request, _ []byte) (int, string) {
		if i == 2 {
			return 200, `{"success":false,"code":4,"message":"quota"}`
		}
		return 200, plain
	}
	err := c.SaveRawMessages(context.Background(), gAuth, "INBOX.Drafts", msgs)
	var pe *PartialError
	if !errors.As(err, &pe) || pe.Done != 6 || pe.Op != "SaveRawMessages" {
		t.Fatalf("err = %#v; want a PartialError with Done 6", err)
	}
}

func TestBatchDefaultSize(t *testing.T) {
	c := newTestClient(t, "http://x", newFakeClock())
	if c.BatchSize() != DefaultBatchSize {
		t.Fatalf("BatchSize() = %d; want %d", c.BatchSize(), DefaultBatchSize)
	}
	c = newTestClient(t, "http://x", newFakeClock(), func(o *Options) { o.BatchSize = -5 })
	if c.BatchSize() != DefaultBatchSize {
		t.Fatalf("BatchSize() with a negative option = %d", c.BatchSize())
	}
	rec := newRecorder(t)
	c = newTestClient(t, rec.srv.URL, newFakeClock())
	uids := make([]int64, 1001)
	for i := range uids {
		uids[i] = int64(i + 1)
	}
	if err := c.MarkMessagesAsReadByUIDs(context.Background(), gAuth, "INBOX", uids); err != nil {
		t.Fatal(err)
	}
	var sizes []int
	for _, b := range uidBatches(t, rec.requests()) {
		sizes = append(sizes, len(b))
	}
	if !slices.Equal(sizes, []int{500, 500, 1}) {
		t.Fatalf("default batch sizes %v", sizes)
	}
}

func TestChunk(t *testing.T) {
	if got := chunk([]int{}, 3); got != nil {
		t.Fatalf("chunk(empty) = %v; want nil", got)
	}
	if got := chunk([]int{1, 2, 3}, 3); !reflect.DeepEqual(got, [][]int{{1, 2, 3}}) {
		t.Fatalf("chunk exact = %v", got)
	}
	if got := chunk([]int{1, 2, 3, 4}, 1); !reflect.DeepEqual(got, [][]int{{1}, {2}, {3}, {4}}) {
		t.Fatalf("chunk by one = %v", got)
	}
	s := []int{1, 2, 3, 4, 5}
	parts := chunk(s, 2)
	if !reflect.DeepEqual(parts, [][]int{{1, 2}, {3, 4}, {5}}) {
		t.Fatalf("chunk = %v", parts)
	}
	// Appending to one batch must not overwrite the next.
	_ = append(parts[0], 99)
	if !slices.Equal(s, []int{1, 2, 3, 4, 5}) {
		t.Fatalf("append to a batch changed the input: %v", s)
	}
}

// TestRawPayloadIsTheSameJSON: the request SaveRaw writes by hand is,
// byte for byte, what encoding RawMessagesRequestType gives, its length
// is told right, and it reads the same through reads of any size.
func TestRawPayloadIsTheSameJSON(t *testing.T) {
	auth := directapi.Authentication{Username: "a<b>&c@direct.example", Password: directapi.Secret("p\"w\\\u00e9")}
	raws := [][]byte{[]byte("Subject: x\r\n\r\nhello\r\n"), {}, bytes.Repeat([]byte{0, 1, 2, 0xff}, 1000)}
	b, err := newRawBody(auth, raws)
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(b.Open())
	if err != nil {
		t.Fatal(err)
	}
	msgs := make([]directapi.RawMessage, len(raws))
	for i, r := range raws {
		msgs[i] = directapi.NewRawMessage(r)
	}
	var want bytes.Buffer
	enc := json.NewEncoder(&want)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(directapi.RawMessagesRequestType{Auth: auth, Messages: msgs}); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want.Bytes()) {
		t.Fatalf("payload differs:\n%s\nwant\n%s", got[:min(len(got), 300)], want.Bytes()[:min(want.Len(), 300)])
	}
	if b.Len() != int64(len(got)) {
		t.Errorf("Len %d for %d bytes", b.Len(), len(got))
	}
	for _, r := range []func(io.Reader) io.Reader{iotest.OneByteReader, iotest.HalfReader, iotest.DataErrReader} {
		again, err := io.ReadAll(r(b.Open()))
		if err != nil || !bytes.Equal(again, got) {
			t.Errorf("read again in small pieces: %d bytes, %v; differs", len(again), err)
		}
	}
}
