package admin

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/directbridge/directbridge/upstream/directapi"
)

// adminPasswordEnv holds the password an admin command needs, for scripts;
// without it the password is read from standard input. Never a flag: flags
// show in ps and in shell history.
const adminPasswordEnv = "DIRECTBRIDGE_ADMIN_PASSWORD"

// adminCallTimeout is longer than the server's own request time limit, so
// the server's answer (CodeTimeout) arrives before the client gives up.
const adminCallTimeout = DefaultRequestTimeout + 30*time.Second

const adminUsage = `usage: directbridge admin <command> [flags]

Talks to the running bridge over its admin socket and prints the answer as
JSON. The socket is DIRECTBRIDGE_ADMIN_SOCKET, else admin.sock in
DIRECTBRIDGE_DATA_DIR (as for the bridge), else --socket PATH.

Commands:
  health
        provider reachability and uptime; exit status 1 when the provider
        is unreachable
  provision --domain D (--id N | --first F --last L --ssn4 NNNN --dob YYYY-MM-DD)
            [--username U] [--no-password]
        provision a Direct address U@D for an identity-proofed patient;
        asks for the new mailbox's password (none with --no-password: the
        provider then picks one, to be replaced with set-password)
  patient --domain D (--username U | --id N | --first F --last L --ssn4 NNNN --dob YYYY-MM-DD)
        the addresses of a patient, by Direct username or by identity
  set-password --domain D --username U
        set the password of the mailbox U@D; asks for it
  status --user ADDR [--smtp-id ID[,ID...]] [--direct-addr ADDR]
        delivery status of sent messages, asking for the password of
        --user; without --smtp-id, the messages --user sent through this
        bridge in the last 7 days; with --direct-addr, --user is a T-user
        acting for that mailbox and --smtp-id is required
  forward --user ADDR --folder F --uid N[,N...] --to ADDR[,ADDR...]
        have the provider forward stored messages of --user's folder F
        (attachments and all) to the recipients; prefix an address with
        cc: or bcc: for those; asks for the password of --user
  stats --user ADDR [--folder F[,F...]]
        message, unread and deleted counts of every folder (or those
        given) of --user's mailbox; asks for its password
  messages --user ADDR --folder F (--since T [--before T] | --sender A |
           --subject S | --all) [--utc] [--full]
        list a folder's messages (metadata only) with the provider's own
        search operations: by received date (T in RFC 3339; --utc: the
        operations' UTC form), sender, subject, or all; --full asks the
        operations that return whole messages; asks for the password

Passwords are never flags: a command takes its password from
DIRECTBRIDGE_ADMIN_PASSWORD, else reads it from standard input (on a
terminal it prompts, without echo). --ssn4 and --dob are visible to other
local users in the process list while the command runs.

Exit status: 0 success; 1 an error answer (its code is printed) or no
connection; 2 bad usage.
`

// usageError is a mistake on the command line: exit status 2.
type usageError string

func (e usageError) Error() string { return string(e) }

// csvList is a repeatable flag of comma-separated values.
type csvList []string

func (l *csvList) String() string { return strings.Join(*l, ",") }

func (l *csvList) Set(v string) error {
	for _, s := range strings.Split(v, ",") {
		if s = strings.TrimSpace(s); s != "" {
			*l = append(*l, s)
		}
	}
	return nil
}

// identityFlags are the flags that name an identity-proofed patient.
type identityFlags struct {
	id                     int64
	first, last, ssn4, dob string
}

func (f *identityFlags) register(fs *flag.FlagSet) {
	fs.Int64Var(&f.id, "id", 0, "identity proofing record id (instead of --first, --last, --ssn4, --dob)")
	fs.StringVar(&f.first, "first", "", "patient's first name")
	fs.StringVar(&f.last, "last", "", "patient's last name")
	fs.StringVar(&f.ssn4, "ssn4", "", "last four digits of the patient's SSN")
	fs.StringVar(&f.dob, "dob", "", "patient's date of birth, e.g. 1980-02-03")
}

func (f *identityFlags) given() bool {
	return f.id != 0 || f.first != "" || f.last != "" || f.ssn4 != "" || f.dob != ""
}

func (f *identityFlags) identity() (Identity, error) {
	if f.id != 0 {
		if f.first != "" || f.last != "" || f.ssn4 != "" || f.dob != "" {
			return Identity{}, usageError("give --id or --first, --last, --ssn4 and --dob, not both")
		}
		return Identity{ID: f.id}, nil
	}
	if f.first == "" || f.last == "" || f.ssn4 == "" || f.dob == "" {
		return Identity{}, usageError("give --id, or all of --first, --last, --ssn4 and --dob")
	}
	return Identity{FirstName: f.first, LastName: f.last, SSN4: f.ssn4, DOB: f.dob}, nil
}

// adminCommand is one parsed command: its operation and a function that
// builds its arguments (reading a password if it needs one) once the
// socket answers.
type adminCommand struct {
	op   string
	args func() (any, error)
}

// RunCLI runs `directbridge admin ...` and returns the exit status.
//
// defaultSocket gives the socket's path when --socket is not given (""
// when the socket is off): the daemon's own rule (bridge.Config's
// AdminSocketPath), which this package cannot import.
func RunCLI(args []string, stdin io.Reader, stdout, stderr io.Writer, defaultSocket func() string) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, adminUsage)
		return 2
	}
	switch args[0] {
	case "help", "-h", "-help", "--help":
		fmt.Fprint(stdout, adminUsage)
		return 0
	}
	name := args[0]
	fs := flag.NewFlagSet("directbridge admin "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	socket := fs.String("socket", "", "admin socket (default: DIRECTBRIDGE_ADMIN_SOCKET, else DATA_DIR/admin.sock)")
	pw := func(prompt string, confirm bool) (directapi.Secret, error) {
		s, err := readPassword(stdin, stderr, prompt, confirm)
		return directapi.Secret(s), err
	}
	cmd, err := parseAdmin(name, fs, args[1:], pw)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		var ue usageError
		if errors.As(err, &ue) {
			fmt.Fprintf(stderr, "directbridge admin: %v\n", err)
			fmt.Fprintln(stderr, "(directbridge admin help lists the commands)")
		}
		return 2 // the flag package has printed its own complaint
	}
	path := *socket
	if path == "" {
		if path = defaultSocket(); path == "" {
			fmt.Fprintln(stderr, "directbridge admin: the admin socket is off (DIRECTBRIDGE_ADMIN_SOCKET=off); give --socket")
			return 2
		}
	}

	ctx, cancel := context.WithTimeout(context.Background(), adminCallTimeout)
	defer cancel()
	// Connect before asking for a password, so nobody types one for a
	// bridge that is not running.
	c, err := Dial(ctx, path)
	if err != nil {
		if e := errors.Unwrap(err); e != nil {
			err = e // the socket's path is named below
		}
		fmt.Fprintf(stderr, "directbridge admin: cannot connect to %s: %v (is the bridge running, with the same DIRECTBRIDGE_DATA_DIR or DIRECTBRIDGE_ADMIN_SOCKET?)\n",
			path, err)
		return 1
	}
	defer c.Close()
	reqArgs, err := cmd.args()
	if err != nil {
		fmt.Fprintf(stderr, "directbridge admin: %v\n", err)
		var ue usageError
		if errors.As(err, &ue) {
			return 2
		}
		return 1
	}
	var result json.RawMessage
	if err := c.Call(ctx, cmd.op, reqArgs, &result); err != nil {
		fmt.Fprintf(stderr, "directbridge admin: %v\n", err)
		return 1
	}
	var out bytes.Buffer
	if err := json.Indent(&out, result, "", "  "); err != nil {
		out.Reset()
		out.Write(result)
	}
	out.WriteByte('\n')
	stdout.Write(out.Bytes())
	if cmd.op == OpHealth {
		var h HealthResult
		if json.Unmarshal(result, &h) != nil || !h.Provider.Reachable {
			return 1
		}
	}
	return 0
}

// parseAdmin parses the flags of command name.
func parseAdmin(name string, fs *flag.FlagSet, args []string, password func(prompt string, confirm bool) (directapi.Secret, error)) (adminCommand, error) {
	var cmd adminCommand
	var parse func() error // checks the parsed flags
	switch name {
	case "health":
		cmd = adminCommand{op: OpHealth, args: func() (any, error) { return nil, nil }}
		parse = func() error { return nil }

	case "provision":
		domain := fs.String("domain", "", "Direct domain of the new address (required)")
		username := fs.String("username", "", "Direct username, the local part of the address (default: the provider picks one)")
		noPassword := fs.Bool("no-password", false, "do not set a password: the provider picks one nobody knows; set it later with set-password")
		var who identityFlags
		who.register(fs)
		parse = func() error {
			if *domain == "" {
				return usageError("provision needs --domain")
			}
			id, err := who.identity()
			if err != nil {
				return err
			}
			cmd = adminCommand{op: OpProvision, args: func() (any, error) {
				a := ProvisionArgs{Domain: *domain, Identity: id, DirectUsername: *username}
				if !*noPassword {
					pw, err := password("Password of the new mailbox: ", true)
					if err != nil {
						return nil, err
					}
					a.DirectPassword = pw
				}
				return a, nil
			}}
			return nil
		}

	case "patient":
		domain := fs.String("domain", "", "Direct domain (required)")
		username := fs.String("username", "", "Direct username (the local part of the address)")
		var who identityFlags
		who.register(fs)
		parse = func() error {
			switch {
			case *domain == "":
				return usageError("patient needs --domain")
			case *username != "" && who.given():
				return usageError("give --username or the patient's identity, not both")
			case *username != "":
				cmd = adminCommand{op: OpPatientByUsername, args: func() (any, error) {
					return PatientByUsernameArgs{Domain: *domain, Username: *username}, nil
				}}
				return nil
			}
			id, err := who.identity()
			if err != nil {
				return usageError("patient needs --username, --id, or --first, --last, --ssn4 and --dob")
			}
			cmd = adminCommand{op: OpPatientByMeta, args: func() (any, error) {
				return PatientByMetaArgs{Domain: *domain, Identity: id}, nil
			}}
			return nil
		}

	case "set-password":
		domain := fs.String("domain", "", "Direct domain (required)")
		username := fs.String("username", "", "Direct username, the local part of the address (required)")
		parse = func() error {
			if *domain == "" || *username == "" {
				return usageError("set-password needs --domain and --username")
			}
			cmd = adminCommand{op: OpSetPasswords, args: func() (any, error) {
				pw, err := password(fmt.Sprintf("New password of %s@%s: ", *username, *domain), true)
				if err != nil {
					return nil, err
				}
				return SetPasswordsArgs{Domain: *domain,
					Passwords: []directapi.UserPassword{{Username: *username, Password: pw}}}, nil
			}}
			return nil
		}

	case "status":
		user := fs.String("user", "", "Direct address whose messages to report (or a T-user, with --direct-addr) (required)")
		directAddr := fs.String("direct-addr", "", "mailbox a T-user --user acts for")
		var ids csvList
		fs.Var(&ids, "smtp-id", "smtpId of a sent message; repeat the flag or separate with commas")
		parse = func() error {
			switch {
			case *user == "":
				return usageError("status needs --user")
			case *directAddr != "" && len(ids) == 0:
				return usageError("status with --direct-addr needs --smtp-id")
			}
			cmd = adminCommand{op: OpStatus, args: func() (any, error) {
				pw, err := password(fmt.Sprintf("Password of %s: ", *user), false)
				if err != nil {
					return nil, err
				}
				if *directAddr != "" {
					return StatusTuserArgs{User: *user, Password: pw, DirectAddr: *directAddr, SmtpIDs: ids}, nil
				}
				return StatusArgs{User: *user, Password: pw, SmtpIDs: ids}, nil
			}}
			if *directAddr != "" {
				cmd.op = OpStatusTuser
			}
			return nil
		}

	case "forward":
		user := fs.String("user", "", "Direct address whose messages to forward (required)")
		folder := fs.String("folder", "", "folder of the messages, e.g. INBOX (required)")
		var uids, to csvList
		fs.Var(&uids, "uid", "UID of a message; repeat the flag or separate with commas (required)")
		fs.Var(&to, "to", "recipient address, cc:ADDR or bcc:ADDR; repeat or separate with commas (required)")
		parse = func() error {
			if *user == "" || *folder == "" || len(uids) == 0 || len(to) == 0 {
				return usageError("forward needs --user, --folder, --uid and --to")
			}
			var ids []int64
			for _, u := range uids {
				n, err := strconv.ParseInt(u, 10, 64)
				if err != nil || n <= 0 {
					return usageError(fmt.Sprintf("--uid %q is not a UID", u))
				}
				ids = append(ids, n)
			}
			cmd = adminCommand{op: OpForward, args: func() (any, error) {
				pw, err := password(fmt.Sprintf("Password of %s: ", *user), false)
				if err != nil {
					return nil, err
				}
				return ForwardArgs{User: *user, Password: pw, Folder: *folder, UIDs: ids, Recipients: to}, nil
			}}
			return nil
		}

	case "stats":
		user := fs.String("user", "", "Direct address of the mailbox (required)")
		var folders csvList
		fs.Var(&folders, "folder", "folder to count; repeat or separate with commas (default: every folder)")
		parse = func() error {
			if *user == "" {
				return usageError("stats needs --user")
			}
			cmd = adminCommand{op: OpStats, args: func() (any, error) {
				pw, err := password(fmt.Sprintf("Password of %s: ", *user), false)
				if err != nil {
					return nil, err
				}
				return StatsArgs{User: *user, Password: pw, Folders: folders}, nil
			}}
			return nil
		}

	case "messages":
		user := fs.String("user", "", "Direct address of the mailbox (required)")
		folder := fs.String("folder", "", "folder to list, e.g. INBOX (required)")
		since := fs.String("since", "", "received at or after (RFC 3339)")
		before := fs.String("before", "", "received before (RFC 3339; default now)")
		sender := fs.String("sender", "", "sender address, as the provider matches it")
		subject := fs.String("subject", "", "subject, as the provider matches it")
		all := fs.Bool("all", false, "every message")
		utc := fs.Bool("utc", false, "use the UTC form of the received-date operations")
		full := fs.Bool("full", false, "use the operations that return whole messages")
		parse = func() error {
			if *user == "" || *folder == "" {
				return usageError("messages needs --user and --folder")
			}
			a := MessagesArgs{User: *user, Folder: *folder, Sender: *sender, Subject: *subject, All: *all, UTC: *utc, Full: *full}
			for _, f := range []struct {
				name, v string
				t       *time.Time
			}{{"since", *since, &a.Since}, {"before", *before, &a.Before}} {
				if f.v == "" {
					continue
				}
				t, err := time.Parse(time.RFC3339, f.v)
				if err != nil {
					return usageError(fmt.Sprintf("--%s %q is not an RFC 3339 time", f.name, f.v))
				}
				*f.t = t
			}
			cmd = adminCommand{op: OpMessages, args: func() (any, error) {
				pw, err := password(fmt.Sprintf("Password of %s: ", *user), false)
				if err != nil {
					return nil, err
				}
				a.Password = pw
				return a, nil
			}}
			return nil
		}

	default:
		return cmd, usageError(fmt.Sprintf("unknown command %q", name))
	}
	if err := fs.Parse(args); err != nil {
		return cmd, err
	}
	if fs.NArg() > 0 {
		return cmd, usageError(fmt.Sprintf("unexpected argument %q (passwords are never arguments; see DIRECTBRIDGE_ADMIN_PASSWORD)", fs.Arg(0)))
	}
	return cmd, parse()
}

// readPassword returns DIRECTBRIDGE_ADMIN_PASSWORD, else reads one line
// from stdin: with a prompt and without echo on a terminal (twice when
// confirm is set), as it comes from a pipe. An empty password is a usage
// error.
func readPassword(stdin io.Reader, stderr io.Writer, prompt string, confirm bool) (string, error) {
	if pw := os.Getenv(adminPasswordEnv); pw != "" {
		return pw, nil
	}
	var pw string
	if f, ok := stdin.(*os.File); ok && isTerminal(f) {
		var err error
		if pw, err = readNoEcho(f, stderr, prompt); err != nil {
			return "", err
		}
		if confirm && pw != "" {
			again, err := readNoEcho(f, stderr, "Again: ")
			if err != nil {
				return "", err
			}
			if again != pw {
				return "", usageError("the passwords differ")
			}
		}
	} else {
		line, err := bufio.NewReader(io.LimitReader(stdin, 4096)).ReadString('\n')
		if err != nil && !errors.Is(err, io.EOF) {
			return "", fmt.Errorf("reading the password: %w", err)
		}
		pw = strings.TrimRight(line, "\r\n")
	}
	if pw == "" {
		return "", usageError("no password: set " + adminPasswordEnv + " or write it to standard input")
	}
	return pw, nil
}
