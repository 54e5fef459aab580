package imapbackend_test

import (
	"os/exec"
	"strings"
	"testing"
)

// pyClient is a Python imaplib session (a real third-party client) that
// walks through the commands a mail client uses, printing one line per
// step; the Go test checks the lines.
const pyClient = `
import imaplib, ssl, sys, time, email

host, port, tls_port, user, pw = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], sys.argv[5]

def check(label, res):
    typ, data = res
    print(label, typ, file=sys.stdout)
    return data

Q = '"INBOX.Py Test"'  # imaplib does not quote names with spaces itself
m = imaplib.IMAP4(host, port)
m.starttls(ssl_context=ssl._create_unverified_context())
check("login", m.login(user, pw))
data = check("capability", m.capability())
print("caps", data[0].decode())
check("namespace", m.namespace())
data = check("list", m.list('""', '*'))
print("folders", " | ".join(d.decode() for d in data))
check("create", m.create(Q))
check("subscribe", m.subscribe(Q))
data = check("lsub", m.lsub('""', 'INBOX.Py*'))
print("lsub", b" ".join(data).decode())
msg = b"From: alice@direct.example\r\nTo: bob@direct.example\r\nSubject: py append\r\nMessage-ID: <py-append@example>\r\n\r\nappended by imaplib\r\n"
check("append", m.append(Q, r"(\Flagged)", None, msg))
typ, data = m.select("INBOX")
print("select", typ, data[0].decode())
data = check("search", m.uid("SEARCH", None, "ALL"))
uids = data[0].split()
print("uids", len(uids))
data = check("fetch", m.uid("FETCH", uids[0], "(UID FLAGS RFC822.SIZE BODY.PEEK[HEADER.FIELDS (SUBJECT)])"))
print("fetched", b" ".join(p if isinstance(p, bytes) else b" ".join(p) for p in data).decode(errors="replace").replace("\r\n", " "))
data = check("fetchbody", m.uid("FETCH", uids[0], "(BODY[])"))
body = data[0][1]
print("bodylen", len(body))
data = check("store", m.uid("STORE", uids[0], "+FLAGS", r"(\Flagged $Label1)"))
print("stored", b" ".join(data).decode())
data = check("search2", m.uid("SEARCH", None, "FLAGGED"))
print("flagged", data[0].decode())
check("copy", m.uid("COPY", uids[0], Q))
typ, data = m.select(Q)
print("select2", typ, data[0].decode())
data = check("fetch2", m.fetch("1:*", "(FLAGS)"))
print("flags2", " ".join(d.decode() for d in data))
check("store2", m.store("1", "+FLAGS", r"(\Deleted)"))
data = check("expunge", m.expunge())
print("expunged", b" ".join(d for d in data if d).decode())
check("close", m.close())
data = check("status", m.status(Q, "(MESSAGES UIDNEXT UIDVALIDITY UNSEEN)"))
print("status", data[0].decode())
check("rename", m.rename(Q, '"INBOX.Py Renamed"'))
check("delete", m.delete('"INBOX.Py Renamed"'))
check("logout", m.logout())

s = imaplib.IMAP4_SSL(host, tls_port, ssl_context=ssl._create_unverified_context())
try:
    s.login(user, "wrong password")
    print("badlogin OK")
except imaplib.IMAP4.error as e:
    print("badlogin NO", str(e))
`

// TestPythonImaplib drives the front with Python's imaplib over STARTTLS
// and implicit TLS.
func TestPythonImaplib(t *testing.T) {
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("python3 not installed")
	}
	e := newEnv(t, options{})
	e.deliver(alice, "INBOX", testMessage("py-one"))
	e.deliver(alice, "INBOX", testMessage("py-two"))
	host, port, _ := strings.Cut(e.addr, ":")
	_, tlsPort, _ := strings.Cut(e.tlsAddr, ":")
	out, err := exec.Command("python3", "-c", pyClient, host, port, tlsPort, alice, alicePW).CombinedOutput()
	text := string(out)
	if err != nil {
		t.Fatalf("imaplib session failed: %v\n%s", err, text)
	}
	for _, want := range []string{
		"login OK", "namespace OK", "list OK", "create OK", "subscribe OK", "append OK",
		"select OK 2", "uids 2", "fetch OK", "Subject: py-one", "bodylen ", "store OK",
		`\Flagged`, "$Label1", "copy OK", "select2 OK 2", "expunge OK", "close OK",
		"status OK", "rename OK", "delete OK", "logout BYE", "badlogin NO",
		`"INBOX.Sent"`, `\Sent`, `\Trash`, "INBOX.Py Test",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("imaplib output lacks %q", want)
		}
	}
	if t.Failed() {
		t.Logf("imaplib output:\n%s", text)
	}
}
