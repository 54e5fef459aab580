package sandbox

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"database/sql"
	"errors"
	"fmt"
	"net/mail"
	"strings"

	"github.com/directbridge/directbridge/internal/sqlstmt"
	"github.com/directbridge/directbridge/upstream/directapi"
)

// Folder names fixed by the document (messaging-rest.md, "Folder rules").
const (
	Inbox     = "INBOX"
	Sent      = "INBOX.Sent"
	Templates = "INBOX.Templates"
	Drafts    = "INBOX.Drafts"
	Spam      = "INBOX.Spam"
	Trash     = "INBOX.Trash"
)

// reservedFolders cannot be created, deleted or renamed. INBOX.Trash is
// not among them: the document lists only these five.
var reservedFolders = []string{Inbox, Sent, Templates, Drafts, Spam}

// initialFolders are created with every mailbox. INBOX.Trash is created
// too, so mail clients find it from the start; DeleteMessagesByUIDs
// re-creates it if a user removed it.
var initialFolders = append(append([]string{}, reservedFolders...), Trash)

func isReserved(name string) bool {
	for _, r := range reservedFolders {
		if name == r {
			return true
		}
	}
	return false
}

// hashPassword salts and hashes a password. The sandbox is a test double,
// not a vault: salted SHA-256 keeps plain passwords out of its database
// without making every request pay for a slow KDF.
func hashPassword(pw string) (salt, hash []byte) {
	salt = make([]byte, 16)
	rand.Read(salt)
	return salt, passwordHash(salt, pw)
}

func passwordHash(salt []byte, pw string) []byte {
	h := sha256.New()
	h.Write(salt)
	h.Write([]byte(pw))
	return h.Sum(nil)
}

func passwordMatches(salt, hash []byte, pw string) bool {
	return subtle.ConstantTimeCompare(passwordHash(salt, pw), hash) == 1
}

// normAddress returns the addr-spec of a Direct address, lower-cased, or
// an error if it is not an address.
func normAddress(s string) (string, error) {
	s = strings.TrimSpace(s)
	a, err := mail.ParseAddress(s)
	if err != nil || a.Name != "" || !strings.Contains(a.Address, "@") {
		return "", fmt.Errorf("not a valid address: %q", s)
	}
	return strings.ToLower(a.Address), nil
}

func domainOf(addr string) string {
	return strings.ToLower(addr[strings.LastIndexByte(addr, '@')+1:])
}

// user is an authenticated mailbox.
type user struct {
	id      int64
	address string
}

// seed creates the configured mailboxes and registration accounts, or
// resets their passwords when they exist: the configuration is the truth.
func (s *Server) seed(ctx context.Context, users, resellers []Account) error {
	return s.tx(ctx, func(tx *sqlstmt.Tx) error {
		for _, a := range users {
			addr, err := normAddress(a.Name)
			if err != nil {
				return fmt.Errorf("sandbox: seeding users: %w", err)
			}
			if _, err := s.createOrResetMailbox(tx, addr, a.Password); err != nil {
				return err
			}
		}
		for _, a := range resellers {
			if a.Name == "" {
				return errors.New("sandbox: seeding resellers: empty username")
			}
			salt, hash := hashPassword(a.Password)
			_, err := tx.Exec(`INSERT INTO resellers (username, pw_salt, pw_hash) VALUES (?, ?, ?)
				ON CONFLICT (username) DO UPDATE SET pw_salt = excluded.pw_salt, pw_hash = excluded.pw_hash`, a.Name, salt, hash)
			if err != nil {
				return fmt.Errorf("sandbox: seeding resellers: %w", err)
			}
		}
		return nil
	})
}

// createOrResetMailbox creates a mailbox with its initial folders, or sets
// the password of an existing one. It returns the user id.
func (s *Server) createOrResetMailbox(tx *sqlstmt.Tx, addr, password string) (int64, error) {
	salt, hash := hashPassword(password)
	var id int64
	err := tx.QueryRow(`SELECT id FROM users WHERE address = ?`, addr).Scan(&id)
	if err == nil {
		_, err = tx.Exec(`UPDATE users SET pw_salt = ?, pw_hash = ? WHERE id = ?`, salt, hash, id)
		return id, err
	}
	if !errors.Is(err, sql.ErrNoRows) {
		return 0, err
	}
	res, err := tx.Exec(`INSERT INTO users (address, pw_salt, pw_hash, created_at) VALUES (?, ?, ?, ?)`,
		addr, salt, hash, s.now().UnixMilli())
	if err != nil {
		return 0, fmt.Errorf("sandbox: creating mailbox: %w", err)
	}
	id, _ = res.LastInsertId()
	for _, f := range initialFolders {
		if _, err := createFolderRow(tx, id, f); err != nil {
			return 0, err
		}
	}
	return id, nil
}

// authenticate checks messaging credentials (code 1 on failure). A
// disabled user "cannot connect to the mailbox" (registration-rest.md,
// UserStateType), so it fails authentication too.
func (s *Server) authenticate(tx *sqlstmt.Tx, username string, password directapi.Secret) (user, error) {
	var u user
	var salt, hash []byte
	var state string
	err := tx.QueryRow(`SELECT id, address, pw_salt, pw_hash, state FROM users WHERE address = ?`,
		strings.TrimSpace(username)).Scan(&u.id, &u.address, &salt, &hash, &state)
	if errors.Is(err, sql.ErrNoRows) {
		// Spend the same work as a real check, so timing does not tell
		// which addresses exist.
		passwordMatches(make([]byte, 16), make([]byte, 32), password.Reveal())
		return user{}, errAuth()
	}
	if err != nil {
		return user{}, err
	}
	if !passwordMatches(salt, hash, password.Reveal()) || state == string(directapi.UserStateDisabled) {
		return user{}, errAuth()
	}
	return u, nil
}

// authenticateTuser checks the credentials of a T-user and resolves the
// address it acts for. T-users are accounts of their own kind: the
// registration accounts (resellers and the T-users they create), never a
// mailbox user, so one mailbox cannot send as another. A T-user acts only
// for mailboxes of its own domain: the domain of its user name when that
// is an address, else the sandbox's domain. What a provider allows here
// is not shown; this is the narrowest reading of "T-user" that the
// registration document's account kinds support. A wrong password or a
// mailbox user's credentials are an authentication failure (code 1); a
// directAddr outside the domain or unknown is an address error (code 2).
func (s *Server) authenticateTuser(tx *sqlstmt.Tx, a directapi.AuthenticationWithTuser) (user, error) {
	if strings.TrimSpace(a.DirectAddr) == "" {
		return user{}, errAddress("directAddr missing")
	}
	var salt, hash []byte
	qerr := tx.QueryRow(`SELECT pw_salt, pw_hash FROM resellers WHERE username = ?`, strings.TrimSpace(a.Username)).Scan(&salt, &hash)
	if qerr != nil && !errors.Is(qerr, sql.ErrNoRows) {
		return user{}, qerr
	}
	if qerr != nil {
		// Spend the same work as a real check.
		passwordMatches(make([]byte, 16), make([]byte, 32), a.Password.Reveal())
		return user{}, errAuth()
	}
	if !passwordMatches(salt, hash, a.Password.Reveal()) {
		return user{}, errAuth()
	}
	addr, err := normAddress(a.DirectAddr)
	if err != nil {
		return user{}, errAddress("directAddr: %v", err)
	}
	domain := s.domain
	if _, d, ok := strings.Cut(strings.TrimSpace(a.Username), "@"); ok && d != "" {
		domain = d
	}
	if !strings.EqualFold(domainOf(addr), domain) {
		return user{}, errAddress("directAddr %s is outside %s, the domain this T-user acts for", addr, domain)
	}
	var u user
	err = tx.QueryRow(`SELECT id, address FROM users WHERE address = ?`, addr).Scan(&u.id, &u.address)
	if errors.Is(err, sql.ErrNoRows) {
		return user{}, errAddress("directAddr %s is not a mailbox of this provider", addr)
	}
	return u, err
}

// hostsDomain reports whether the sandbox is authoritative for domain: its
// own domain or the domain of any mailbox it holds.
func (s *Server) hostsDomain(tx *sqlstmt.Tx, domain string) (bool, error) {
	if strings.EqualFold(domain, s.domain) {
		return true, nil
	}
	var n int
	err := tx.QueryRow(`SELECT COUNT(*) FROM users WHERE address LIKE ? ESCAPE '\'`, "%@"+escapeLike(domain)).Scan(&n)
	return n > 0, err
}

func escapeLike(s string) string {
	return strings.NewReplacer(`\`, `\\`, `%`, `\%`, `_`, `\_`).Replace(s)
}
