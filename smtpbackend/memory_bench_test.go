package smtpbackend_test

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/textproto"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/emersion/go-sasl"
	"github.com/emersion/go-smtp"

	"github.com/directbridge/directbridge/internal/login"
	"github.com/directbridge/directbridge/internal/memwatch"
	"github.com/directbridge/directbridge/restclient"
	"github.com/directbridge/directbridge/smtpbackend"
)

// Memory per message. Run with
//
//	go test -run NONE -bench Memory -benchtime 1x ./smtpbackend/
//
// or one kind per process, for its VmHWM: -bench 'DataMemory/plain-text$'.
//
// BenchmarkDataMemory sends one 50 MB message of each kind through a real
// SMTP connection to the bridge, whose provider is a stub that reads each
// request as it streams in and throws it away: what is measured is the
// bridge's own cost, not a provider's (the embedded sandbox composes and
// stores the message, which a real provider does elsewhere). It reports
//   - peak-heap-MB: the highest Go heap in use (HeapInuse: live and
//     not yet collected objects, sampled every millisecond) above the
//     heap before the message, the client's copy of it excluded;
//   - VmHWM-MB: the process's peak resident memory above its peak before,
//     what a container's memory limit counts (meaningful with -benchtime
//     1x in a process of its own: the peak never comes down);
//   - request-MB: the bytes of the provider request (0 when the bridge
//     refused the message).
//
// The target is 200 MB for a 50 MB message of any content.
func BenchmarkDataMemory(b *testing.B) {
	const size = 50_000_000
	head := "From: " + aliceAddr + "\r\nTo: " + bobAddr + "\r\nSubject: memory\r\n"
	kinds := []struct {
		name string
		raw  func() []byte
	}{
		{"plain-text", func() []byte {
			return textMessage(head+"\r\n", size, "line %07d of a long clinical document, plain ASCII text")
		}},
		{"control-chars", func() []byte {
			// Every byte but the line ends is one JSON writes as \u00XX:
			// six times its size once encoded, past the request limit.
			return textMessage(head+"\r\n", size, "\x01\x02\x03\x04\x05\x06\x07\x0b\x0e\x0f\x10\x11\x12\x13\x14\x15\x16\x17\x18\x19\x1a\x1b\x1c\x1d\x1e\x1f%07d")
		}},
		{"attachment", func() []byte { return attachmentMessage(head, size) }},
		{"latin1-text", func() []byte {
			// Bytes that are not UTF-8, read as Windows-1252: each
			// becomes two bytes of UTF-8.
			return textMessage(head+"Content-Type: text/plain; charset=windows-1252\r\n\r\n", size, "\xe9\xe8\xe0\xfc\xf6\xe4 %07d \xb5g \xe9\xe8\xe0\xfc\xf6\xe4")
		}},
		{"euro-text", func() []byte {
			// Windows-1252 bytes that each become three bytes of UTF-8
			// (0x80 is U+20AC): the most a text grows when decoded.
			return textMessage(head+"Content-Type: text/plain; charset=windows-1252\r\n\r\n", size, "\x80\x80\x80\x80\x80\x80\x80\x80\x80\x80\x80\x80\x80\x80\x80\x80\x80\x80\x80\x80\x80\x80\x80\x80\x80\x80\x80\x80\x80\x80%07d")
		}},
		{"euro-text-fits", func() []byte {
			// The most such text a send request takes: 21 MB that
			// decode to 62 MB, under the 64 MiB request limit, sent.
			return textMessage(head+"Content-Type: text/plain; charset=windows-1252\r\n\r\n", 21_000_000, "\x80\x80\x80\x80\x80\x80\x80\x80\x80\x80\x80\x80\x80\x80\x80\x80\x80\x80\x80\x80\x80\x80\x80\x80\x80\x80\x80\x80\x80\x80%07d")
		}},
	}
	for _, k := range kinds {
		for _, announce := range []bool{true, false} {
			name := k.name
			if !announce {
				name += "/no-SIZE"
			}
			b.Run(name, func(b *testing.B) {
				raw := k.raw()
				stub := newDiscardProvider(b)
				h := newMemHarness(b, stub.URL)
				var peak, hwm int64
				var reply string
				for range b.N {
					stub.reset()
					c := h.login(b)
					m := memwatch.Start()
					reply = sendOnce(c, raw, announce)
					p, w := m.Stop()
					peak, hwm = max(peak, p), max(hwm, w)
					c.Close()
				}
				b.ReportMetric(float64(peak)/1e6, "peak-heap-MB")
				b.ReportMetric(float64(hwm)/1e6, "VmHWM-MB")
				b.ReportMetric(float64(stub.sendBytes.Load())/1e6, "request-MB")
				b.Logf("%s (%d bytes): %s; peak heap +%.1f MB, VmHWM +%.1f MB, request %.1f MB",
					name, len(raw), reply, float64(peak)/1e6, float64(hwm)/1e6, float64(stub.sendBytes.Load())/1e6)
			})
		}
	}
}

// textMessage is header followed by CRLF lines of format (with a line
// number) up to exactly n bytes.
func textMessage(header string, n int, format string) []byte {
	b := make([]byte, 0, n+128)
	b = append(b, header...)
	for i := 0; len(b) < n; i++ {
		b = fmt.Appendf(b, format, i)
		b = append(b, "\r\n"...)
	}
	b = b[:n-2]
	return append(b, "\r\n"...)
}

// attachmentMessage is a short text part and one attachment whose base64
// lines fill the message up to about n bytes (36 MB of binary bytes).
func attachmentMessage(head string, n int) []byte {
	var b bytes.Buffer
	b.Grow(n + 4096)
	b.WriteString(head + "MIME-Version: 1.0\r\nContent-Type: multipart/mixed; boundary=b1\r\n\r\n" +
		"--b1\r\nContent-Type: text/plain\r\n\r\nSee the attached document.\r\n" +
		"--b1\r\nContent-Type: application/octet-stream\r\nContent-Disposition: attachment; filename=doc.bin\r\n" +
		"Content-Transfer-Encoding: base64\r\n\r\n")
	bin := make([]byte, 57)
	for i := 0; b.Len() < n-100; i++ {
		for j := range bin {
			bin[j] = byte(i*7 + j*13)
		}
		b.WriteString(base64.StdEncoding.EncodeToString(bin))
		b.WriteString("\r\n")
	}
	b.WriteString("--b1--\r\n")
	return b.Bytes()
}

// sendOnce submits raw to bob and returns the reply (or the error).
func sendOnce(c *smtp.Client, raw []byte, announce bool) string {
	var opts *smtp.MailOptions
	if announce {
		opts = &smtp.MailOptions{Size: int64(len(raw))}
	}
	if err := c.Mail(aliceAddr, opts); err != nil {
		return "MAIL: " + err.Error()
	}
	if err := c.Rcpt(bobAddr, nil); err != nil {
		return "RCPT: " + err.Error()
	}
	w, err := c.Data()
	if err != nil {
		return "DATA: " + err.Error()
	}
	if _, err := w.Write(raw); err != nil {
		w.Close()
		return "writing: " + err.Error()
	}
	if err := w.Close(); err != nil {
		return err.Error()
	}
	return "250"
}

// memHarness is a bridge SMTP front on a provider stub, over plain TCP
// (AUTH is allowed on loopback).
type memHarness struct {
	addr string
}

func newMemHarness(tb testing.TB, providerURL string) *memHarness {
	rc, err := restclient.New(restclient.Options{BaseURL: providerURL, Clock: fakeClock{}})
	if err != nil {
		tb.Fatal(err)
	}
	srv, err := smtpbackend.New(smtpbackend.Config{
		Provider:        restclient.Upstream(rc),
		Verifier:        login.NewVerifier(restclient.Upstream(rc), 0),
		Hostname:        "bridge.test",
		MaxMessageBytes: smtpbackend.DefaultMaxMessageBytes,
	})
	if err != nil {
		tb.Fatal(err)
	}
	h := &harness{srv: srv}
	addr := h.serve(tb, srv.ServeSubmission, "127.0.0.1:0")
	tb.Cleanup(func() { srv.Shutdown(tb.Context()) })
	return &memHarness{addr: addr}
}

func (h *memHarness) login(tb testing.TB) *smtp.Client {
	c, err := smtp.Dial(h.addr)
	if err != nil {
		tb.Fatal(err)
	}
	if err := c.Hello("client.example"); err != nil {
		tb.Fatal(err)
	}
	if err := c.Auth(sasl.NewPlainClient("", aliceAddr, passwords[aliceAddr])); err != nil {
		tb.Fatal(err)
	}
	return c
}

// discardProvider answers every messaging operation with success and
// reads send requests as they arrive without keeping them.
type discardProvider struct {
	*httptest.Server
	sends     atomic.Int64
	sendBytes atomic.Int64
}

func newDiscardProvider(tb testing.TB) *discardProvider {
	p := &discardProvider{}
	p.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n, _ := io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		if strings.Contains(r.URL.Path, "/Send") {
			p.sends.Add(1)
			p.sendBytes.Add(n)
			fmt.Fprintf(w, `{"success":true,"code":0,"message":"sent","smtpId":"<%d@provider.test>"}`, p.sends.Load())
			return
		}
		io.WriteString(w, `{"success":true,"code":0,"message":"","count":0}`)
	}))
	tb.Cleanup(p.Close)
	return p
}

func (p *discardProvider) reset() { p.sends.Store(0); p.sendBytes.Store(0) }

// BenchmarkCommandLineMemory: ten connections of one account, each
// authenticated, send a 50 MB command line at once. Each is refused after
// its first 64 KiB (cmdlines.go), so the memory they add is a few times
// that per connection, nothing like the 50 MB each a line as long as a
// message would hold. Target: under 10 MB for the ten.
func BenchmarkCommandLineMemory(b *testing.B) {
	stub := newDiscardProvider(b)
	h := newMemHarness(b, stub.URL)
	var peak, hwm int64
	for range b.N {
		conns := make([]net.Conn, 10)
		for i := range conns {
			conns[i] = h.loginRaw(b)
		}
		m := memwatch.Start()
		var wg sync.WaitGroup
		for _, nc := range conns {
			wg.Go(func() {
				lineFlood(nc, 50<<20)
				nc.Close()
			})
		}
		wg.Wait()
		p, w := m.Stop()
		peak, hwm = max(peak, p), max(hwm, w)
	}
	b.ReportMetric(float64(peak)/1e6, "peak-heap-MB")
	b.ReportMetric(float64(hwm)/1e6, "VmHWM-MB")
	b.Logf("10 connections x 50 MB command line: peak heap +%.1f MB, VmHWM +%.1f MB", float64(peak)/1e6, float64(hwm)/1e6)
}

// loginRaw dials the front without a client library, says EHLO and
// authenticates alice with AUTH PLAIN.
func (h *memHarness) loginRaw(tb testing.TB) net.Conn {
	nc, err := net.Dial("tcp", h.addr)
	if err != nil {
		tb.Fatal(err)
	}
	tc := textproto.NewConn(nc)
	ir := base64.StdEncoding.EncodeToString([]byte("\x00" + aliceAddr + "\x00" + passwords[aliceAddr]))
	for _, step := range []struct {
		line string
		code int
	}{{"", 220}, {"EHLO client.example", 250}, {"AUTH PLAIN " + ir, 235}} {
		if step.line != "" {
			tc.PrintfLine("%s", step.line)
		}
		if _, _, err := tc.ReadResponse(step.code); err != nil {
			tb.Fatalf("%q: %v", step.line, err)
		}
	}
	return nc
}
