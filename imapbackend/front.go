package imapbackend

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"encoding/base64"
	"errors"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/emersion/go-imap/v2"

	"github.com/directbridge/directbridge/internal/director"
	"github.com/directbridge/directbridge/internal/limits"
)

// The director's accepting half (internal/director). With
// Config.Director set, this replica answers a client itself until it
// logs in: the greeting, CAPABILITY, NOOP, LOGOUT, STARTTLS, LOGIN and
// AUTHENTICATE PLAIN, as go-imap does (the same capabilities, the same
// responses), and checks the password (checkLogin). Then it hands the
// connection over: to go-imap in this process when this replica is the
// user's home (directed.go), else to the home over a link, whose bytes
// it then relays (proxy.go). Doing the part before LOGIN here, not in
// go-imap, is what lets the connection move: at the end of LOGIN this
// code knows where the command ended and holds every byte the client
// sent after it, which go-imap's reader would have taken.

const (
	// frontMaxLine bounds a command line before login: a LOGIN's
	// address and password, or an AUTHENTICATE response.
	frontMaxLine = 8 << 10
	// frontMaxLiteral is the largest literal taken before login: LITERAL-
	// (RFC 7888 §5), which go-imap announces.
	frontMaxLiteral = 4096
	// frontReadTimeout is go-imap's wait for a command before login.
	frontReadTimeout = 30 * time.Second
	// frontWriteTimeout bounds a write to a client before login.
	frontWriteTimeout = time.Minute
)

// frontConn is one client connection until it logs in.
type frontConn struct {
	srv   *Server
	c     net.Conn // the client's, TLS once STARTTLS is done
	br    *bufio.Reader
	tlsOn bool // the connection is TLS (implicit, or after STARTTLS)
	// insecureAuth allows LOGIN without TLS (loopback, AllowInsecureAuth).
	insecureAuth bool

	wmu    sync.Mutex // writes: the front's, and Shutdown's BYE
	closed bool       // by Shutdown

	line []byte // the command line being parsed (without CRLF)
	pos  int
}

// errFrontSyntax is a command the front cannot parse: BAD [CLIENTBUG].
type errFrontSyntax string

func (e errFrontSyntax) Error() string { return string(e) }

// serveFront answers the clients on l until they log in. implicitTLS:
// l's connections are TLS already (tls.NewListener).
func (s *Server) serveFront(l net.Listener, implicitTLS, insecureAuth bool) error {
	if !s.addListener(l) {
		return nil
	}
	err := director.AcceptLoop(l, func(c net.Conn) {
		f := &frontConn{srv: s, c: c, br: bufio.NewReader(c), tlsOn: implicitTLS, insecureAuth: insecureAuth}
		f.serve()
	})
	if s.isClosed() {
		return nil
	}
	return err
}

// serve runs the connection until it logs in or ends.
func (f *frontConn) serve() {
	handed := false
	if !track(f.srv, f.srv.fronts, f) {
		f.c.Close()
		return
	}
	defer func() {
		if v := recover(); v != nil {
			f.srv.cfg.Logger.Error("imap front: panic", "panic", v)
		}
		untrack(f.srv, f.srv.fronts, f)
		if !handed {
			f.c.Close()
		}
	}()
	if !f.write("* OK [CAPABILITY " + f.caps() + "] IMAP server ready\r\n") {
		return
	}
	for {
		f.c.SetReadDeadline(time.Now().Add(frontReadTimeout))
		tag, name, err := f.readCommand()
		if err != nil {
			if errors.Is(err, errFrontLineTooLong) {
				f.write("* BYE Command line too long\r\n")
			}
			return
		}
		var done bool
		switch name {
		case "":
			done = !f.write("* BAD [CLIENTBUG] Syntax error: expected a tag and a command\r\n")
		case "CAPABILITY":
			done = !f.simple(tag, name, "* CAPABILITY "+f.caps()+"\r\n")
		case "NOOP", "CHECK":
			done = !f.simple(tag, name, "")
		case "LOGOUT":
			f.simple(tag, name, "* BYE Logging out\r\n")
			return
		case "STARTTLS":
			done = !f.startTLS(tag)
		case "LOGIN":
			handed, done = f.login(tag)
		case "AUTHENTICATE":
			handed, done = f.authenticate(tag)
		case "ENABLE", "CREATE", "DELETE", "RENAME", "SUBSCRIBE", "UNSUBSCRIBE", "STATUS", "LIST", "LSUB",
			"NAMESPACE", "IDLE", "SELECT", "EXAMINE", "APPEND", "UNAUTHENTICATE":
			// go-imap's answer: the command exists, not in this state.
			if !f.skipLiterals() {
				return
			}
			done = !f.write(tag + " BAD [CLIENTBUG] This command is only valid in the authenticated state\r\n")
		case "CLOSE", "UNSELECT", "FETCH", "EXPUNGE", "STORE", "COPY", "MOVE", "SEARCH", "UID":
			if !f.skipLiterals() {
				return
			}
			done = !f.write(tag + " BAD [CLIENTBUG] This command is only valid in the selected state\r\n")
		default:
			// As go-imap: one unknown command before login ends the
			// connection, against cross-protocol attacks.
			f.write(tag + " BAD Unknown command\r\n* BYE Unknown command\r\n")
			return
		}
		if handed || done {
			return
		}
	}
}

// caps are the capabilities before login, as go-imap lists them
// (imapserver's availableCaps in the not-authenticated state).
func (f *frontConn) caps() string {
	c := []string{string(imap.CapIMAP4rev1), string(imap.CapSASLIR), string(imap.CapLiteralMinus)}
	if f.srv.cfg.TLSConfig != nil && !f.tlsOn {
		c = append(c, string(imap.CapStartTLS))
	}
	if f.canAuth() {
		c = append(c, "AUTH=PLAIN")
	} else {
		c = append(c, string(imap.CapLoginDisabled))
	}
	return strings.Join(c, " ")
}

func (f *frontConn) canAuth() bool { return f.tlsOn || f.insecureAuth }

// simple answers a command without arguments: untagged, then OK.
func (f *frontConn) simple(tag, name, untagged string) bool {
	if err := f.eol(); err != nil {
		return f.syntaxError(tag, err)
	}
	return f.write(untagged + tag + " OK " + name + " completed\r\n")
}

func (f *frontConn) syntaxError(tag string, err error) bool {
	return f.write(tag + " BAD [CLIENTBUG] Syntax error: " + err.Error() + "\r\n")
}

// answer writes err (an *imap.Error of errors.go) as the tagged answer.
func (f *frontConn) answer(tag string, err error) bool {
	var ie *imap.Error
	if !errors.As(err, &ie) {
		ie = internalError
	}
	return f.write(tag + " " + statusLine(ie) + "\r\n")
}

// internalError answers what errors.go did not map (none should reach it).
var internalError = &imap.Error{Type: imap.StatusResponseTypeNo, Code: imap.ResponseCodeServerBug, Text: "Internal server error"}

// statusLine is "TYPE [CODE] text" of e.
func statusLine(e *imap.Error) string {
	s := string(e.Type) + " "
	if e.Code != "" {
		s += "[" + string(e.Code) + "] "
	}
	return s + e.Text
}

// write writes s to the client; false when the connection is done.
func (f *frontConn) write(s string) bool {
	f.wmu.Lock()
	defer f.wmu.Unlock()
	if f.closed {
		return false
	}
	f.c.SetWriteDeadline(time.Now().Add(frontWriteTimeout))
	_, err := f.c.Write([]byte(s))
	f.c.SetWriteDeadline(time.Time{})
	return err == nil
}

// bye says BYE and closes the connection, for Shutdown.
func (f *frontConn) bye(text string) {
	f.wmu.Lock()
	defer f.wmu.Unlock()
	if f.closed {
		return
	}
	f.closed = true
	f.c.SetWriteDeadline(time.Now().Add(time.Second))
	f.c.Write([]byte("* BYE " + text + "\r\n"))
	f.c.Close()
}

// startTLS upgrades the connection (RFC 9051 §6.2.1), as go-imap does:
// bytes the client sent after the command are the start of its TLS
// handshake.
func (f *frontConn) startTLS(tag string) bool {
	if err := f.eol(); err != nil {
		return f.syntaxError(tag, err)
	}
	if f.srv.cfg.TLSConfig == nil {
		return f.write(tag + " NO STARTTLS not supported\r\n")
	}
	if f.tlsOn {
		return f.write(tag + " BAD STARTTLS not available\r\n")
	}
	if !f.write(tag + " OK Begin TLS negotiation now\r\n") {
		return false
	}
	tc := tls.Server(&readerConn{Conn: f.c, r: f.br}, f.srv.cfg.TLSConfig)
	f.c.SetDeadline(time.Now().Add(frontReadTimeout))
	if err := tc.Handshake(); err != nil {
		return false
	}
	f.c.SetDeadline(time.Time{})
	f.wmu.Lock()
	f.c = tc
	f.wmu.Unlock()
	f.br = bufio.NewReader(tc)
	f.tlsOn = true
	return true
}

// readerConn is a connection whose reads come from r (a reader over it
// that may hold bytes already).
type readerConn struct {
	net.Conn
	r *bufio.Reader
}

func (c *readerConn) Read(p []byte) (int, error) { return c.r.Read(p) }
func (c *readerConn) Unwrap() net.Conn           { return c.Conn }

// login answers LOGIN (RFC 9051 §6.2.3).
func (f *frontConn) login(tag string) (handed, done bool) {
	user, err := f.astringArg()
	var pass string
	if err == nil {
		pass, err = f.astringArg()
	}
	if err == nil {
		err = f.eol()
	}
	if err != nil {
		var ee errFrontSyntax
		switch {
		case errors.Is(err, errLiteralTooBig):
			// As go-imap: NO [TOOBIG], the literal not sent.
			return false, !f.write(tag + " NO [TOOBIG] Literal too large\r\n")
		case errors.As(err, &ee):
			return false, !f.syntaxError(tag, err)
		}
		return false, true
	}
	if !f.canAuth() {
		return false, !f.write(tag + " NO [PRIVACYREQUIRED] TLS is required to authenticate\r\n")
	}
	return f.direct(tag, user, pass, "Logged in")
}

// authenticate answers AUTHENTICATE PLAIN (RFC 9051 §6.2.2, RFC 4616),
// with an initial response (SASL-IR, RFC 4959) or after a continuation.
func (f *frontConn) authenticate(tag string) (handed, done bool) {
	mech, err := f.atomArg()
	var ir string
	hasIR := false
	if err == nil && f.pos < len(f.line) && f.line[f.pos] == ' ' {
		f.pos++
		ir, hasIR = string(f.line[f.pos:]), true
		f.pos = len(f.line)
	}
	if err == nil {
		err = f.eol()
	}
	if err != nil {
		return false, !f.syntaxError(tag, err)
	}
	if !f.canAuth() {
		return false, !f.write(tag + " NO [PRIVACYREQUIRED] TLS is required to authenticate\r\n")
	}
	if !strings.EqualFold(mech, "PLAIN") {
		return false, !f.write(tag + " NO SASL mechanism not supported\r\n")
	}
	if !hasIR {
		if !f.write("+ \r\n") {
			return false, true
		}
		f.c.SetReadDeadline(time.Now().Add(frontReadTimeout))
		line, err := f.readLine()
		if err != nil {
			return false, true
		}
		if string(line) == "*" {
			return false, !f.write(tag + " BAD AUTHENTICATE cancelled\r\n")
		}
		ir = string(line)
	}
	resp, err := decodeSASL(ir)
	if err != nil {
		return false, !f.write(tag + " BAD Malformed SASL response\r\n")
	}
	parts := bytes.Split(resp, []byte{0})
	if len(parts) != 3 || len(parts[1]) == 0 {
		return false, !f.write(tag + " BAD [CLIENTBUG] Malformed PLAIN response\r\n")
	}
	if len(parts[0]) > 0 && string(parts[0]) != string(parts[1]) {
		return false, !f.write(tag + " NO [AUTHORIZATIONFAILED] SASL identity not supported\r\n")
	}
	return f.direct(tag, string(parts[1]), string(parts[2]), "PLAIN authentication successful")
}

// decodeSASL decodes a SASL response: base64, "=" for an empty one
// (RFC 4959 §3).
func decodeSASL(s string) ([]byte, error) {
	if s == "=" {
		return []byte{}, nil
	}
	return base64.StdEncoding.DecodeString(s)
}

// direct logs the client in and hands the connection to the user's
// home: this replica's go-imap, or another replica over a link. On a
// refusal the client stays here, not logged in, as with go-imap.
func (f *frontConn) direct(tag, user, pass, okText string) (handed, done bool) {
	s := f.srv
	user = normalizeUser(user)
	ctx, cancel := context.WithTimeout(context.Background(), s.cfg.CallTimeout)
	defer cancel()
	err := s.checkLogin(ctx, f.c.RemoteAddr(), user, pass)
	if err != nil {
		observeLogin(s.cfg.Metrics, err)
		return false, !f.answer(tag, err)
	}
	if replica, addr, remote := s.cfg.Director.Home(user); remote {
		link, err := s.cfg.Director.Dial(ctx, replica, addr, director.Hello{User: user, Password: pass, Client: f.c.RemoteAddr().String()})
		if err != nil {
			s.cfg.Logger.Warn("imap: the user's home replica did not answer; serving here", "user", user, "replica", replica, "err", err)
		} else {
			line, took := taggedGreeting(tag, link.Greeting, okText)
			switch {
			case took:
				observeLogin(s.cfg.Metrics, nil)
				if !f.write(line) {
					link.Close()
					return false, true
				}
				limits.Authenticated(f.c)
				s.cfg.Metrics.Directed("remote")
				untrack(s, s.fronts, f) // the relay's now: Shutdown drains it as one
				s.proxy(f, link, replica)
				return true, true
			case strings.HasPrefix(line, tag+" NO [UNAVAILABLE]"):
				// The home is shutting down, or cannot reach its state
				// store: not a home for now.
				link.Close()
				s.cfg.Director.MarkDown(replica)
				s.cfg.Logger.Info("imap: the user's home replica is unavailable; serving here", "user", user, "replica", replica)
			case line != "": // the home refused (BYE): its reason
				link.Close()
				observeLogin(s.cfg.Metrics, errRefusedByHome)
				return false, !f.write(line)
			default:
				link.Close()
				s.cfg.Logger.Warn("imap: the user's home replica answered no greeting; serving here", "user", user, "replica", replica)
			}
		}
	}
	if err := s.admit(ctx, user); err != nil {
		observeLogin(s.cfg.Metrics, err)
		return false, !f.answer(tag, err)
	}
	observeLogin(s.cfg.Metrics, nil)
	dc := &directedConn{Conn: f.c, r: f.br, remote: f.c.RemoteAddr(), user: user, password: pass, greetTag: tag, greetText: okText}
	s.cfg.Metrics.Directed("local")
	untrack(s, s.fronts, f) // go-imap's now: Shutdown says BYE to it as a session
	if !s.handoff.Push(dc) {
		s.dropConn(user)
		f.write(tag + " NO [UNAVAILABLE] Server shutting down; reconnect later\r\n")
		return false, true
	}
	return true, true
}

// errRefusedByHome counts a login the home replica refused.
var errRefusedByHome = no(imap.ResponseCodeUnavailable, "refused by the home replica")

// taggedGreeting turns the home's greeting into the answer to the
// client's LOGIN or AUTHENTICATE: "* PREAUTH [CAPABILITY …] …" into
// "tag OK [CAPABILITY …] okText" (took), "* BYE [CODE] text" into
// "tag NO [CODE] text"; "" for anything else.
func taggedGreeting(tag, greeting, okText string) (line string, took bool) {
	greeting = strings.TrimRight(greeting, "\r\n")
	if rest, ok := strings.CutPrefix(greeting, "* PREAUTH "); ok {
		code := ""
		if strings.HasPrefix(rest, "[") {
			if i := strings.Index(rest, "]"); i > 0 {
				code = rest[:i+1] + " "
			}
		}
		return tag + " OK " + code + okText + "\r\n", true
	}
	if rest, ok := strings.CutPrefix(greeting, "* BYE "); ok {
		return tag + " NO " + rest + "\r\n", false
	}
	return "", false
}

// Parsing of the commands before login (RFC 9051 §9).

var (
	errFrontLineTooLong = errors.New("command line too long")
	errLiteralTooBig    = errors.New("literal too large")
)

// readLine reads a line of at most frontMaxLine bytes, without CRLF.
func (f *frontConn) readLine() ([]byte, error) {
	var line []byte
	for {
		frag, err := f.br.ReadSlice('\n')
		line = append(line, frag...)
		if len(line) > frontMaxLine {
			return nil, errFrontLineTooLong
		}
		if err == nil {
			return bytes.TrimSuffix(bytes.TrimSuffix(line, []byte("\n")), []byte("\r")), nil
		}
		if !errors.Is(err, bufio.ErrBufferFull) {
			return nil, err
		}
	}
}

// readCommand reads a command line: its tag and its name (upper case);
// "" names for a line without them.
func (f *frontConn) readCommand() (tag, name string, err error) {
	f.line, err = f.readLine()
	if err != nil {
		return "", "", err
	}
	f.pos = 0
	tag, err = f.atom()
	if err != nil || tag == "" || strings.Contains(tag, "+") {
		return "", "", nil
	}
	name, err = f.atomArg()
	if err != nil {
		return "", "", nil
	}
	return tag, strings.ToUpper(name), nil
}

// isAtomChar: ATOM-CHAR of RFC 9051 §9, plus "]" when astring (ASTRING-CHAR).
// Bytes from 0x80 pass, as go-imap lets them: a UTF-8 password sent as an
// atom (RFC 9051 allows UTF-8 in astrings, utf8-quoted aside) logs in.
func isAtomChar(c byte, astring bool) bool {
	switch {
	case c <= 0x1f || c == 0x7f:
		return false
	case c == '(' || c == ')' || c == '{' || c == ' ' || c == '%' || c == '*' || c == '"' || c == '\\':
		return false
	case c == ']':
		return astring
	}
	return true
}

func (f *frontConn) atom() (string, error) {
	start := f.pos
	for f.pos < len(f.line) && isAtomChar(f.line[f.pos], false) {
		f.pos++
	}
	if f.pos == start {
		return "", errFrontSyntax("expected an atom")
	}
	return string(f.line[start:f.pos]), nil
}

func (f *frontConn) sp() error {
	if f.pos >= len(f.line) || f.line[f.pos] != ' ' {
		return errFrontSyntax("expected SP")
	}
	f.pos++
	return nil
}

func (f *frontConn) atomArg() (string, error) {
	if err := f.sp(); err != nil {
		return "", err
	}
	return f.atom()
}

func (f *frontConn) eol() error {
	if f.pos != len(f.line) {
		return errFrontSyntax("expected CRLF")
	}
	return nil
}

// astringArg reads SP astring: an atom, a quoted string, or a literal
// (synchronising, or non-synchronising up to frontMaxLiteral: LITERAL-).
// A literal's end of line is read on, as the rest of the command.
func (f *frontConn) astringArg() (string, error) {
	if err := f.sp(); err != nil {
		return "", err
	}
	if f.pos >= len(f.line) {
		return "", errFrontSyntax("expected a string")
	}
	switch f.line[f.pos] {
	case '"':
		var b strings.Builder
		for f.pos++; f.pos < len(f.line); f.pos++ {
			c := f.line[f.pos]
			switch c {
			case '"':
				f.pos++
				return b.String(), nil
			case '\\':
				f.pos++
				if f.pos >= len(f.line) || f.line[f.pos] != '"' && f.line[f.pos] != '\\' {
					return "", errFrontSyntax("bad escape in a quoted string")
				}
				b.WriteByte(f.line[f.pos])
			default:
				b.WriteByte(c)
			}
		}
		return "", errFrontSyntax("unterminated quoted string")
	case '{':
		n, sync, err := f.literalHeader()
		if err != nil {
			return "", err
		}
		if n > frontMaxLiteral {
			if sync {
				return "", errLiteralTooBig
			}
			// Its bytes are on the way and would be read as commands.
			f.write("* BYE Literal too large\r\n")
			return "", net.ErrClosed
		}
		if sync && !f.write("+ Ready for literal data\r\n") {
			return "", net.ErrClosed
		}
		buf := make([]byte, n)
		if _, err := io.ReadFull(f.br, buf); err != nil {
			return "", err
		}
		rest, err := f.readLine()
		if err != nil {
			return "", err
		}
		f.line, f.pos = rest, 0
		return string(buf), nil
	}
	start := f.pos
	for f.pos < len(f.line) && isAtomChar(f.line[f.pos], true) {
		f.pos++
	}
	if f.pos == start {
		return "", errFrontSyntax("expected a string")
	}
	return string(f.line[start:f.pos]), nil
}

// literalHeader parses "{n}" or "{n+}", which must end the line.
func (f *frontConn) literalHeader() (n int, sync bool, err error) {
	rest := f.line[f.pos:]
	if len(rest) < 3 || rest[len(rest)-1] != '}' {
		return 0, false, errFrontSyntax("bad literal")
	}
	digits := rest[1 : len(rest)-1]
	sync = true
	if bytes.HasSuffix(digits, []byte("+")) {
		digits, sync = digits[:len(digits)-1], false
	}
	n, convErr := strconv.Atoi(string(digits))
	if convErr != nil || n < 0 {
		return 0, false, errFrontSyntax("bad literal")
	}
	f.pos = len(f.line)
	return n, sync, nil
}

// skipLiterals reads past the literals of a command the front refuses:
// a non-synchronising literal's bytes are on the way and must not be
// taken for commands (RFC 7888 §4); a synchronising one is never sent,
// as the client waits for a continuation it does not get. False when
// the connection must end.
func (f *frontConn) skipLiterals() bool {
	for {
		i := bytes.LastIndexByte(f.line, '{')
		if i < 0 || !bytes.HasSuffix(f.line, []byte("}")) {
			return true
		}
		f.pos = i
		n, sync, err := f.literalHeader()
		if err != nil || sync {
			return true
		}
		if n > frontMaxLiteral {
			f.write("* BYE Literal too large\r\n")
			return false
		}
		if _, err := f.br.Discard(n); err != nil {
			return false
		}
		if f.line, err = f.readLine(); err != nil {
			return false
		}
	}
}
