package sandbox

import (
	"fmt"
	"os"
	"strings"
	"time"
)

// Config is the sandbox's part of the environment (read with envconfig
// under the prefix DIRECTBRIDGE, so Addr is DIRECTBRIDGE_SANDBOX_ADDR).
type Config struct {
	Addr         string `envconfig:"SANDBOX_ADDR" default:"127.0.0.1:8080" desc:"address the sandbox provider listens on (host:port)"`
	Data         string `envconfig:"SANDBOX_DATA" desc:"directory of the sandbox database; empty: DATA_DIR/sandbox for the bridge, a temporary database removed at exit for the sandbox command"`
	Domain       string `envconfig:"SANDBOX_DOMAIN" default:"direct.example" desc:"Direct domain the sandbox hosts"`
	Users        string `envconfig:"SANDBOX_USERS" desc:"mailboxes to seed, as addr:password,addr:password; empty: two demo mailboxes"`
	UsersFile    string `envconfig:"SANDBOX_USERS_FILE" desc:"a file of more mailboxes to seed, addr:password one per line (or separated by commas): for thousands of them, more than an environment variable holds (Linux takes 128 KiB)"`
	Reseller     string `envconfig:"SANDBOX_RESELLER" desc:"registration account to seed, as user:password; empty: a demo account"`
	MaxBody      int64  `envconfig:"SANDBOX_MAX_BODY" default:"67108864" desc:"largest request body the sandbox accepts, in bytes"`
	StatusCSV    bool   `envconfig:"SANDBOX_STATUS_CSV" default:"false" desc:"answer status operations with csvData instead of messageLogs"`
	ChildrenOnly bool   `envconfig:"SANDBOX_FOLDERS_CHILDREN_ONLY" default:"false" desc:"GetFolders lists the direct children of its root only, as some providers do, instead of the whole tree"`
	MintIDs      bool   `envconfig:"SANDBOX_MINT_MESSAGE_IDS" default:"false" desc:"give every sent message a Message-ID of the sandbox's own (its smtpId), as some providers do, instead of keeping the client's"`
	// Latency stands for a slow provider when the bridge is measured.
	Latency time.Duration `envconfig:"SANDBOX_LATENCY" default:"0s" desc:"time added to every REST answer, to measure the bridge against a slow or distant provider (e.g. 20ms); 0: none"`
}

// DemoPassword is the password of the demo accounts; they exist only when
// no accounts are configured, and README names them.
const DemoPassword = "sandbox-demo"

// DemoUsers returns the demo mailboxes of domain.
func DemoUsers(domain string) []Account {
	return []Account{{Name: "alice@" + domain, Password: DemoPassword}, {Name: "bob@" + domain, Password: DemoPassword}}
}

// DemoReseller is the demo registration account.
var DemoReseller = Account{Name: "reseller", Password: DemoPassword}

// Options turns the configuration into Options. Demo reports whether demo
// accounts were used (their passwords may then be shown).
func (c Config) Options() (opts Options, demo bool, err error) {
	opts = Options{Dir: c.Data, Domain: c.Domain, MaxBodyBytes: c.MaxBody, StatusAsCSV: c.StatusCSV, MintMessageIDs: c.MintIDs, FoldersChildrenOnly: c.ChildrenOnly, Latency: c.Latency}
	if c.MaxBody < 0 {
		return opts, false, fmt.Errorf("DIRECTBRIDGE_SANDBOX_MAX_BODY must not be negative")
	}
	if c.Latency < 0 {
		return opts, false, fmt.Errorf("DIRECTBRIDGE_SANDBOX_LATENCY must not be negative")
	}
	users := c.Users
	if c.UsersFile != "" {
		b, err := os.ReadFile(c.UsersFile)
		if err != nil {
			return opts, false, fmt.Errorf("DIRECTBRIDGE_SANDBOX_USERS_FILE: %w", err)
		}
		users += "," + strings.ReplaceAll(strings.ReplaceAll(string(b), "\r\n", ","), "\n", ",")
	}
	if strings.Trim(users, ", \t") == "" {
		opts.Users, demo = DemoUsers(opts.Domain), true
	} else if opts.Users, err = ParseAccounts(users); err != nil {
		return opts, false, fmt.Errorf("DIRECTBRIDGE_SANDBOX_USERS: %w", err)
	}
	if strings.TrimSpace(c.Reseller) == "" {
		opts.Resellers = []Account{DemoReseller}
	} else if opts.Resellers, err = ParseAccounts(c.Reseller); err != nil {
		return opts, false, fmt.Errorf("DIRECTBRIDGE_SANDBOX_RESELLER: %w", err)
	}
	return opts, demo, nil
}

// ParseAccounts reads "name:password,name:password". A password may hold
// colons (the first colon separates), not commas.
func ParseAccounts(s string) ([]Account, error) {
	var out []Account
	for i, item := range strings.Split(s, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		name, pw, found := strings.Cut(item, ":")
		if !found || strings.TrimSpace(name) == "" || pw == "" {
			return nil, fmt.Errorf("entry %d: want name:password", i+1)
		}
		out = append(out, Account{Name: strings.TrimSpace(name), Password: pw})
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no accounts")
	}
	return out, nil
}
