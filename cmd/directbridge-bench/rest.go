package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// rest is a minimal client of the provider's messaging API
// (../shared/spec/messaging-rest.md), written here rather than taken from
// package restclient so the benchmark measures any version of the bridge
// the same way and shares no code with what it measures.
type rest struct {
	base string
	hc   *http.Client
}

func newREST(base string) *rest {
	return &rest{base: base + "/message-rest/api/message", hc: &http.Client{
		Timeout:   5 * time.Minute,
		Transport: &http.Transport{MaxIdleConnsPerHost: 32},
	}}
}

type restAuth struct {
	Username string `json:"username"`
	Password string `json:"password"`
}

// call sends body as JSON and fails unless the envelope says success.
func (r *rest) call(ctx context.Context, method, path string, body any) error {
	payload, err := json.Marshal(body)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, method, r.base+path, bytes.NewReader(payload))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := r.hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	var env struct {
		Success bool   `json:"success"`
		Code    int    `json:"code"`
		Message string `json:"message"`
	}
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: HTTP %d", strings.SplitN(path, "/", 3)[1], resp.StatusCode)
	}
	if err := json.Unmarshal(data, &env); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	if !env.Success {
		return fmt.Errorf("%s: code %d: %s", strings.SplitN(path, "/", 3)[1], env.Code, env.Message)
	}
	return nil
}

// saveRaw stores raw messages in folder (SaveRawMessages).
func (r *rest) saveRaw(ctx context.Context, a account, folder string, msgs [][]byte) error {
	type raw struct {
		Data string `json:"data"`
	}
	body := struct {
		Auth     restAuth `json:"auth"`
		Messages []raw    `json:"messages"`
	}{Auth: restAuth{a.user, a.pass}}
	for _, m := range msgs {
		body.Messages = append(body.Messages, raw{Data: base64.StdEncoding.EncodeToString(m)})
	}
	return r.call(ctx, http.MethodPost, "/SaveRawMessages/"+url.PathEscape(folder), body)
}

// send sends a plain-text message from a to the given address (Send).
func (r *rest) send(ctx context.Context, a account, to, subject, text string) error {
	type recipient struct {
		Email string `json:"email"`
		Type  string `json:"type"`
	}
	type message struct {
		Sender     string      `json:"sender"`
		Subject    string      `json:"subject"`
		Body       string      `json:"body"`
		HTMLBody   bool        `json:"htmlBody"`
		Recipients []recipient `json:"recipients"`
	}
	body := struct {
		Authentication restAuth `json:"authentication"`
		Message        message  `json:"message"`
	}{restAuth{a.user, a.pass}, message{Sender: a.user, Subject: subject, Body: text, Recipients: []recipient{{to, "TO"}}}}
	return r.call(ctx, http.MethodPut, "/Send", body)
}

// seed stores n messages from the corpus in a's folder, in batches of 250,
// two batches in flight.
func (r *rest) seed(ctx context.Context, c *corpus, a account, folder string, first, n int) error {
	const batch = 250
	type job struct{ from, to int }
	jobs := make(chan job)
	var wg sync.WaitGroup
	var firstErr atomic.Pointer[error]
	for w := 0; w < 2; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range jobs {
				if firstErr.Load() != nil {
					continue
				}
				msgs := make([][]byte, 0, j.to-j.from)
				for i := j.from; i < j.to; i++ {
					msgs = append(msgs, c.message(i, "sender@direct.example", a.user))
				}
				if err := r.saveRaw(ctx, a, folder, msgs); err != nil {
					err = fmt.Errorf("seed %s: %w", folder, err)
					firstErr.CompareAndSwap(nil, &err)
				}
			}
		}()
	}
	for i := first; i < first+n; i += batch {
		jobs <- job{i, min(i+batch, first+n)}
	}
	close(jobs)
	wg.Wait()
	if p := firstErr.Load(); p != nil {
		return *p
	}
	return nil
}

// delayProxy is a reverse proxy that holds every request for a fixed time
// before passing it on: the provider's network and processing latency.
type delayProxy struct {
	srv   *http.Server
	url   string
	delay time.Duration
}

func startDelayProxy(target string, delay time.Duration) (*delayProxy, error) {
	u, err := url.Parse(target)
	if err != nil {
		return nil, err
	}
	addr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	rp := httputil.NewSingleHostReverseProxy(u)
	rp.Transport = &http.Transport{MaxIdleConnsPerHost: 512, IdleConnTimeout: time.Minute}
	rp.ErrorLog = log.New(io.Discard, "", 0) // a client that gave up is not news
	p := &delayProxy{url: "http://" + addr, delay: delay}
	p.srv = &http.Server{Addr: addr, Handler: http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		t := time.NewTimer(p.delay)
		select {
		case <-t.C:
		case <-req.Context().Done():
			t.Stop()
			return
		}
		rp.ServeHTTP(w, req)
	})}
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	go p.srv.Serve(l)
	return p, nil
}

func (p *delayProxy) close() {
	if p != nil {
		p.srv.Close()
	}
}

// metricsSnapshot is one scrape of the bridge's /metrics: each sample under
// its full name with labels, and the sum of each metric over its labels.
type metricsSnapshot struct {
	samples map[string]float64
	sums    map[string]float64
}

func scrape(ctx context.Context, u string) (metricsSnapshot, error) {
	s := metricsSnapshot{samples: map[string]float64{}, sums: map[string]float64{}}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return s, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return s, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return s, fmt.Errorf("GET %s: HTTP %d", u, resp.StatusCode)
	}
	return parseMetrics(resp.Body)
}

// parseMetrics reads the Prometheus text format (only what this program
// needs: sample lines "name{labels} value").
func parseMetrics(r io.Reader) (metricsSnapshot, error) {
	s := metricsSnapshot{samples: map[string]float64{}, sums: map[string]float64{}}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if i < 0 {
			continue
		}
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			continue
		}
		key := line[:i]
		s.samples[key] = v
		name := key
		if j := strings.IndexByte(key, '{'); j >= 0 {
			name = key[:j]
		}
		s.sums[name] += v
	}
	return s, sc.Err()
}

// label returns the value of a label in a sample key.
func label(key, name string) string {
	i := strings.Index(key, name+`="`)
	if i < 0 {
		return ""
	}
	rest := key[i+len(name)+2:]
	j := strings.IndexByte(rest, '"')
	if j < 0 {
		return ""
	}
	return rest[:j]
}

// byLabel sums the difference between two snapshots of a metric per value
// of one label.
func byLabel(before, after metricsSnapshot, metric, lbl string) map[string]float64 {
	out := map[string]float64{}
	for k, v := range after.samples {
		if strings.HasPrefix(k, metric+"{") {
			if d := v - before.samples[k]; d != 0 {
				out[label(k, lbl)] += d
			}
		}
	}
	return out
}

const (
	metricREST = "directbridge_rest_requests_total"
	metricIMAP = "directbridge_imap_commands_total"
)
