package peerfetch

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/emersion/go-imap/v2"

	"github.com/directbridge/directbridge/internal/mailstore"
)

// Limits of the exchange.
const (
	// Path is the one endpoint a replica serves.
	Path = "/peerfetch/v1/held"
	// MaxSkew bounds how old (or how far ahead) a request may be: the
	// replicas' clocks must agree within it.
	MaxSkew = time.Minute
	// MaxUIDs bounds the messages of one request.
	MaxUIDs = 1000
	// maxRequest bounds a request's bytes (MaxUIDs UIDs and two names).
	maxRequest = 64 << 10
	// maxAnswer bounds an answer's bytes: past it the replica leaves
	// the rest out, which the asker takes from the provider. Small
	// enough to come within Timeout on any network between replicas.
	maxAnswer = 16 << 20
	// maxAnswering bounds the answers built at once: a burst of requests
	// costs at most maxAnswering*maxAnswer of memory; more wait.
	maxAnswering = 4
)

// Source returns the messages of ref among uids that a replica holds in
// memory, without any provider call (mailstore.Store.Holding).
type Source func(ref mailstore.FolderRef, uids []imap.UID) []mailstore.HeldMessage

// Server serves what this replica holds to the others.
type Server struct {
	seal *sealer
	src  Source
	log  *slog.Logger
	srv  *http.Server

	busy    chan struct{} // one token per answer being built
	seen    nonceSet      // requests answered within MaxSkew (replays)
	refused everyMinute   // logging of refused requests
}

// NewServer serves src to the replicas holding journalKey, once Serve is
// called.
func NewServer(journalKey []byte, src Source, log *slog.Logger) (*Server, error) {
	s, err := newSealer(journalKey)
	if err != nil {
		return nil, err
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	sv := &Server{seal: s, src: src, log: log, busy: make(chan struct{}, maxAnswering)}
	mux := http.NewServeMux()
	mux.HandleFunc("POST "+Path, sv.held)
	sv.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second, ReadTimeout: 10 * time.Second,
		WriteTimeout: 30 * time.Second, IdleTimeout: 2 * time.Minute, ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelDebug)}
	return sv, nil
}

// Serve answers the requests that come on ln until Close.
func (sv *Server) Serve(ln net.Listener) error {
	err := sv.srv.Serve(ln)
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}

// Close stops serving, letting answers under way finish within ctx.
func (sv *Server) Close(ctx context.Context) error {
	err := sv.srv.Shutdown(ctx)
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		err = sv.srv.Close()
	}
	return err
}

// held answers one request: 403 to what does not open under the key,
// is too old or was answered before (the asker then takes the messages
// from the provider).
func (sv *Server) held(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxRequest))
	if err != nil {
		http.Error(w, "request too large", http.StatusRequestEntityTooLarge)
		return
	}
	plain, nonce, err := sv.seal.open(body, []byte(requestAD))
	var req request
	if err == nil {
		err = json.Unmarshal(plain, &req)
	}
	if err != nil {
		sv.refuse(w, r, "a request that does not open under the cluster's key (do the replicas share DIRECTBRIDGE_JOURNAL_KEY?)")
		return
	}
	now := time.Now()
	if age := now.Sub(time.UnixMilli(req.T)); age > MaxSkew || age < -MaxSkew {
		sv.refuse(w, r, "a request too old, or from a clock too far off")
		return
	}
	if !sv.seen.add(nonce, now) {
		sv.refuse(w, r, "a request answered before (replayed)")
		return
	}
	if len(req.I) > MaxUIDs {
		http.Error(w, "too many messages", http.StatusBadRequest)
		return
	}
	select {
	case sv.busy <- struct{}{}:
		defer func() { <-sv.busy }()
	case <-r.Context().Done():
		return
	}
	uids := make([]imap.UID, 0, len(req.I))
	for _, u := range req.I {
		if u > 0 && u <= mailstore.MaxUID {
			uids = append(uids, imap.UID(u))
		}
	}
	// Built behind room for the nonce, and sealed in place: one buffer
	// of the answer's size, not two.
	n := sv.seal.aead.NonceSize()
	answer := make([]byte, n, n+64<<10)
	for _, h := range sv.src(mailstore.FolderRef{User: req.U, Folder: req.F, Validity: req.V}, uids) {
		if len(answer)-n+12+len(h.Raw) > maxAnswer {
			break
		}
		prev := len(answer)
		if answer = appendHeld(answer, h); len(answer)-n > maxAnswer {
			answer = answer[:prev] // its metadata took it over the bound
			break
		}
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Write(sv.seal.sealInPlace(answer, answerADFor(nonce)))
}

// refuse answers 403 and logs why, at most once a minute (anyone who can
// reach the port can send such requests).
func (sv *Server) refuse(w http.ResponseWriter, r *http.Request, why string) {
	if sv.refused.allow() {
		sv.log.Warn("peerfetch: refused "+why, "remote", r.RemoteAddr)
	}
	http.Error(w, "forbidden", http.StatusForbidden)
}
