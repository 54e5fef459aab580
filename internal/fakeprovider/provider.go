package fakeprovider

import (
	"context"
	"errors"
	"maps"
	"math/rand/v2"
	"strings"
	"sync"
	"time"

	"github.com/directbridge/directbridge/upstream"
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

// Options configure a Provider.
type Options struct {
	// Users are the mailboxes to create: address to password.
	Users map[string]string
	// Seed seeds the random choices of latency and faults. Calls made
	// concurrently draw in the order they come, so a seed fixes the
	// draws, not which call gets which.
	Seed uint64
	// Latency is added to every call, uniformly random in [Min, Max].
	Latency Latency
	// Faults are injected from the start; SetFaults changes them.
	Faults Faults
	// Now is the clock of received dates; nil is time.Now.
	Now func() time.Time
}

// Provider is the in-memory provider. Create it with New.
type Provider struct {
	now func() time.Time

	// mu guards the mailboxes and the journal.
	mu       sync.Mutex
	accounts map[string]*account // by lower-case address
	journal  []Event
	clock    int64 // Seq of the last event
	losing   bool  // the operation under way will lose its answer

	chaos chaos // latency, faults and call counters (faults.go)
}

var _ upstream.Provider = (*Provider)(nil)

// account is one mailbox user.
type account struct {
	address  string
	password string
	folders  map[string]*folder
	// highwater is the last UID each folder name handed out, kept when
	// the folder is deleted or renamed, so that a folder made again under
	// the name does not reuse UIDs.
	highwater map[string]int64
	sent      []directapi.DirectMessageLog
}

// New returns a Provider holding the mailboxes of o.Users, each with the
// sandbox's initial folders: the five reserved ones and INBOX.Trash.
func New(o Options) *Provider {
	p := &Provider{now: o.Now, accounts: map[string]*account{}}
	if p.now == nil {
		p.now = time.Now
	}
	p.chaos.rng = rand.New(rand.NewPCG(o.Seed, o.Seed^0x6a09e667f3bcc909))
	p.chaos.latency = o.Latency
	p.chaos.faults = o.Faults
	p.chaos.calls = map[string]int64{}
	for addr, pw := range o.Users {
		p.AddUser(addr, pw)
	}
	return p
}

// AddUser creates a mailbox with its initial folders, or sets the password
// of an existing one.
func (p *Provider) AddUser(address, password string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	key := strings.ToLower(strings.TrimSpace(address))
	if a := p.accounts[key]; a != nil {
		a.password = password
		return
	}
	a := &account{address: key, password: password, folders: map[string]*folder{}, highwater: map[string]int64{}}
	for _, name := range initialFolders {
		a.makeFolder(name)
	}
	p.accounts[key] = a
}

// reservedFolders cannot be created, deleted or renamed; INBOX.Trash is
// not among them (the document lists these five).
var reservedFolders = []string{Inbox, Sent, Templates, Drafts, Spam}

// initialFolders are made with every mailbox, INBOX.Trash too, as the
// sandbox does.
var initialFolders = append(append([]string{}, reservedFolders...), Trash)

// op runs one provider operation: it counts the call, waits the first
// half of its latency, may fail it before it runs (ErrTemporary), runs fn
// under the lock for an authenticated account, waits the second half,
// and may lose the answer of a change (ErrUnknownOutcome). restOp is the
// REST operation's name, which the adapter puts in upstream.Error.Op.
func (p *Provider) op(ctx context.Context, method, restOp string, change bool, auth upstream.Auth, fn func(a *account) error) error {
	before, after, fail, lose := p.chaos.draw(method, change)
	if err := pause(ctx, before); err != nil {
		return classified(restOp, upstream.ErrTemporary, "", err)
	}
	if fail {
		return classified(restOp, upstream.ErrTemporary, "", errInjected)
	}
	p.mu.Lock()
	a, err := p.authenticate(auth)
	if err == nil {
		p.losing = lose
		err = fn(a)
		p.losing = false
	}
	p.mu.Unlock()
	if err := pause(ctx, after); err != nil {
		if change {
			return classified(restOp, upstream.ErrUnknownOutcome, "", err)
		}
		return classified(restOp, upstream.ErrTemporary, "", err)
	}
	if lose {
		return classified(restOp, upstream.ErrUnknownOutcome, "", errLost)
	}
	if err != nil {
		return classify(restOp, err)
	}
	return nil
}

// nothing counts a call the REST adapter answers without a request: a
// change or read of no UIDs (or no messages) sends nothing, checks no
// password and succeeds.
func (p *Provider) nothing(method string) {
	p.chaos.mu.Lock()
	defer p.chaos.mu.Unlock()
	p.chaos.calls[method]++
}

// authenticate checks credentials (code 1 on failure). Called with p.mu.
func (p *Provider) authenticate(auth upstream.Auth) (*account, error) {
	a := p.accounts[strings.ToLower(strings.TrimSpace(auth.Username))]
	if a == nil || a.password != auth.Password.Reveal() {
		return nil, errAuth
	}
	return a, nil
}

// account returns the account of address for the methods that act behind
// the bridge's back. Called with p.mu.
func (p *Provider) account(address string) (*account, error) {
	a := p.accounts[strings.ToLower(strings.TrimSpace(address))]
	if a == nil {
		return nil, errors.New("fakeprovider: no mailbox " + address)
	}
	return a, nil
}

// Calls returns how many times method (an upstream.Provider method name,
// e.g. "UIDs", "Save") was called, faulted calls included.
func (p *Provider) Calls(method string) int64 {
	p.chaos.mu.Lock()
	defer p.chaos.mu.Unlock()
	return p.chaos.calls[method]
}

// CallCounts returns a copy of every counter.
func (p *Provider) CallCounts() map[string]int64 {
	p.chaos.mu.Lock()
	defer p.chaos.mu.Unlock()
	return maps.Clone(p.chaos.calls)
}
