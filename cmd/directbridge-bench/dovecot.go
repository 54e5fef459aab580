package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// dovecotProc is a private Dovecot (the Debian package dovecot-imapd), on a
// loopback port, with its own configuration and maildir in a temporary
// directory, set up as ../shared/tools/imaptest/run.sh does; the system
// service is never touched.
type dovecotProc struct {
	cmd     *exec.Cmd
	dir     string
	addr    string
	version string
	done    chan struct{}
}

// dovecotFor starts a private Dovecot holding the same n messages as the
// sandbox (corpus messages 0..n-1, by IMAP APPEND), or says why not.
func (b *bench) dovecotFor(ctx context.Context, name string, a account, n int) (*dovecotProc, string) {
	if !b.o.dovecot {
		return nil, "not compared (-dovecot=false or -quick)"
	}
	if _, err := exec.LookPath("dovecot"); err != nil {
		return nil, "not compared: dovecot is not installed (apt-get install dovecot-imapd)"
	}
	dv, err := startDovecot(ctx, a)
	if err != nil {
		return nil, "not compared: " + oneLine(err.Error())
	}
	t := time.Now()
	c, err := dialIMAP(dv.addr, a, nil)
	if err == nil {
		err = appendAll(c, b.corpus, "sender@direct.example", a.user, n)
		c.Logout().Wait()
	}
	if err != nil {
		dv.stop()
		return nil, "not compared: filling Dovecot: " + oneLine(err.Error())
	}
	b.logf("%s: Dovecot filled with %d messages in %s", name, n, time.Since(t).Round(time.Millisecond))
	return dv, ""
}

func startDovecot(ctx context.Context, a account) (*dovecotProc, error) {
	dir, err := os.MkdirTemp("", "bench-dovecot-")
	if err != nil {
		return nil, err
	}
	dv := &dovecotProc{dir: dir, done: make(chan struct{})}
	fail := func(err error) (*dovecotProc, error) {
		os.RemoveAll(dir)
		return nil, err
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		return fail(err)
	}
	for _, d := range []string{"run", "state", "mail"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			return fail(err)
		}
	}
	var uidLines, loginLines, mailUser, mailGroup string
	if os.Getuid() == 0 {
		// Dovecot refuses to run mail processes as root.
		nobody, err := user.Lookup("nobody")
		if err != nil {
			return fail(err)
		}
		mailUser, mailGroup = "nobody", "nogroup"
		g, err := user.LookupGroup(mailGroup)
		if err != nil {
			if g, err = user.LookupGroupId(nobody.Gid); err != nil {
				return fail(err)
			}
			mailGroup = g.Name
		}
		var uid, gid int
		fmt.Sscan(nobody.Uid, &uid)
		fmt.Sscan(g.Gid, &gid)
		if err := os.Chown(filepath.Join(dir, "mail"), uid, gid); err != nil {
			return fail(err)
		}
		uidLines = fmt.Sprintf("mail_uid = %s\nmail_gid = %s\nfirst_valid_uid = %d\nfirst_valid_gid = %d\n", mailUser, mailGroup, uid, gid)
	} else {
		u, err := user.Current()
		if err != nil {
			return fail(err)
		}
		g, err := user.LookupGroupId(u.Gid)
		if err != nil {
			return fail(err)
		}
		mailUser, mailGroup = u.Username, g.Name
		uidLines = fmt.Sprintf("first_valid_uid = %s\nfirst_valid_gid = %s\n", u.Uid, u.Gid)
		loginLines = fmt.Sprintf("default_internal_user = %s\ndefault_internal_group = %s\ndefault_login_user = %s\nservice anvil {\n  chroot =\n}\nservice imap-login {\n  chroot =\n}\n", mailUser, mailGroup, mailUser)
	}
	if err := os.WriteFile(filepath.Join(dir, "passwd"), []byte(fmt.Sprintf("%s:{PLAIN}%s::::::\n", a.user, a.pass)), 0o644); err != nil {
		return fail(err)
	}
	addr, err := freeAddr()
	if err != nil {
		return fail(err)
	}
	_, port, _ := strings.Cut(addr, ":")
	conf := fmt.Sprintf(`base_dir = %[1]s/run
state_dir = %[1]s/state
instance_name = directbridge-bench-%[2]d
protocols = imap
listen = 127.0.0.1
log_path = %[1]s/dovecot.log
ssl = no
disable_plaintext_auth = no
auth_mechanisms = plain login
mail_location = maildir:%[1]s/mail/%%u
mail_fsync = never
%[3]s%[4]s
passdb {
  driver = passwd-file
  args = scheme=PLAIN username_format=%%u %[1]s/passwd
}
userdb {
  driver = static
  args = uid=%[5]s gid=%[6]s home=%[1]s/mail/%%u
}
service imap-login {
  inet_listener imap {
    address = 127.0.0.1
    port = %[7]s
  }
  inet_listener imaps {
    port = 0
  }
  service_count = 0
}
service imap {
  process_limit = 1024
}
protocol imap {
  mail_max_userip_connections = 1000
}
`, dir, os.Getpid(), uidLines, loginLines, mailUser, mailGroup, port)
	confPath := filepath.Join(dir, "dovecot.conf")
	if err := os.WriteFile(confPath, []byte(conf), 0o644); err != nil {
		return fail(err)
	}
	if v, err := exec.Command("dovecot", "--version").Output(); err == nil {
		dv.version = strings.Fields(string(v) + " ?")[0]
	}
	dv.cmd = exec.Command("dovecot", "-F", "-c", confPath)
	logf, err := os.Create(filepath.Join(dir, "stdout.log"))
	if err != nil {
		return fail(err)
	}
	dv.cmd.Stdout, dv.cmd.Stderr = logf, logf
	if err := dv.cmd.Start(); err != nil {
		logf.Close()
		return fail(err)
	}
	go func() { dv.cmd.Wait(); logf.Close(); close(dv.done) }()
	dv.addr = addr
	p := &proc{name: "dovecot", cmd: dv.cmd, done: dv.done, log: filepath.Join(dir, "dovecot.log")}
	if err := waitListening(ctx, p, addr, "* OK", 30*time.Second); err != nil {
		dv.stop()
		return nil, err
	}
	return dv, nil
}

func (dv *dovecotProc) stop() {
	if dv == nil {
		return
	}
	dv.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-dv.done:
	case <-time.After(15 * time.Second):
		dv.cmd.Process.Kill()
		<-dv.done
	}
	os.RemoveAll(dv.dir)
}

// coldDovecotFor starts a private Dovecot whose INBOX holds the same n
// messages as the sandbox, written straight into its maildir as files
// (one per message, as a delivery agent leaves them) before any client
// logged in: Dovecot has no index and no cache of them yet, so the first
// sync pays for reading and parsing every message, as the bridge's first
// sync pays for loading every message from the provider (issue 22's
// "cold Dovecot").
func (b *bench) coldDovecotFor(ctx context.Context, name string, a account, n int) (*dovecotProc, string) {
	if !b.o.dovecot {
		return nil, "not compared (-dovecot=false or -quick)"
	}
	if _, err := exec.LookPath("dovecot"); err != nil {
		return nil, "not compared: dovecot is not installed (apt-get install dovecot-imapd)"
	}
	t := time.Now()
	dv, err := startDovecot(ctx, a)
	if err == nil {
		err = writeMaildir(filepath.Join(dv.dir, "mail", a.user), b.corpus, a.user, n)
	}
	if err != nil {
		dv.stop()
		return nil, "not compared: " + oneLine(err.Error())
	}
	b.logf("%s: Dovecot's maildir written with %d messages in %s", name, n, time.Since(t).Round(time.Millisecond))
	return dv, ""
}

// writeMaildir writes corpus messages 0..n-1 into the maildir at dir as
// unread mail in cur/, owned as the mail directory is (Dovecot runs mail
// processes as nobody when the bench runs as root).
func writeMaildir(dir string, c *corpus, to string, n int) error {
	owner, err := os.Stat(filepath.Dir(dir))
	if err != nil {
		return err
	}
	st := owner.Sys().(*syscall.Stat_t)
	base := time.Now().Unix()
	for _, sub := range []string{"", "cur", "new", "tmp"} {
		p := filepath.Join(dir, sub)
		if err := os.MkdirAll(p, 0o700); err != nil {
			return err
		}
		if err := os.Lchown(p, int(st.Uid), int(st.Gid)); err != nil {
			return err
		}
	}
	for i := 0; i < n; i++ {
		p := filepath.Join(dir, "cur", fmt.Sprintf("%d.M%dP1.bench:2,", base, i))
		if err := os.WriteFile(p, c.message(i, "sender@direct.example", to), 0o600); err != nil {
			return err
		}
		if err := os.Lchown(p, int(st.Uid), int(st.Gid)); err != nil {
			return err
		}
	}
	return nil
}
