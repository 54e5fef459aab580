package imapbackend_test

import (
	"bufio"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/directbridge/directbridge/imapbackend"
	"github.com/directbridge/directbridge/internal/login"
	"github.com/directbridge/directbridge/internal/testlog"
)

// FuzzIMAPSession feeds arbitrary client input to the IMAP front over a
// real socket in each state: not authenticated, authenticated, with a
// folder selected, and inside an APPEND literal. The server must never
// panic, and must still greet a new client afterwards. The seed corpus
// holds commands of each kind and the shared hard messages as literals.
func FuzzIMAPSession(f *testing.F) {
	plog := &testlog.Panics{}
	e := newEnv(f, options{cfg: func(c *imapbackend.Config) {
		c.Logger = slog.New(plog)
		c.Guard = login.NewGuard(login.GuardConfig{FreeFailures: 1 << 20, RefuseAfter: 1 << 21})
		c.CallTimeout = 5 * time.Second
	}})
	e.deliver(alice, "INBOX", testMessage("fuzz"))
	for _, s := range []string{
		"a CAPABILITY\r\n", "a LOGIN alice x\r\n", "a AUTHENTICATE PLAIN\r\n=\r\n", "a STARTTLS\r\n",
		"a LIST \"\" *\r\n", "a LIST \"\" \"&AGE-\"\r\n", "a STATUS INBOX (MESSAGES UIDNEXT SIZE)\r\n", "a CREATE INBOX.x\r\n",
		"a FETCH 1:* (FLAGS BODY[] BODYSTRUCTURE ENVELOPE BINARY[1]<0.10>)\r\n", "a UID FETCH 1:* (BODY.PEEK[HEADER.FIELDS (SUBJECT)])\r\n",
		"a SEARCH OR FROM x TEXT y\r\n", "a UID SEARCH RETURN (SAVE) ALL\r\na FETCH $ FLAGS\r\n", "a STORE 1 +FLAGS (\\Flagged kw)\r\n",
		"a COPY 1 INBOX.Trash\r\n", "a MOVE 1:* INBOX.Trash\r\n", "a EXPUNGE\r\n", "a IDLE\r\nDONE\r\n", "a APPEND INBOX {5+}\r\nhello\r\n",
		"a FETCH 4294967295 FLAGS\r\n", "a FETCH 1 BODY[1.2.3.4.5.6.7.8.9]\r\n", "* \r\n", "\x00\xff\r\n", "a " + strings.Repeat("(", 200) + "\r\n",
	} {
		for state := byte(0); state < 3; state++ {
			f.Add(state, []byte(s))
		}
	}
	for _, name := range []string{"hard-missing-final-boundary.eml", "hard-multipart-without-boundary.eml", "hard-8bit-unencoded-filename.eml"} {
		if b, err := os.ReadFile(filepath.Join("..", "smtpbackend", "testdata", "messages", name)); err == nil {
			f.Add(byte(3), b)
		}
	}
	f.Fuzz(func(t *testing.T, state byte, input []byte) {
		c, err := net.DialTimeout("tcp", e.addr, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(5 * time.Second))
		r := bufio.NewReader(c)
		r.ReadString('\n') // greeting
		send := func(cmd string) {
			fmt.Fprint(c, cmd)
			for {
				l, err := r.ReadString('\n')
				if err != nil || strings.HasPrefix(l, "p ") || strings.HasPrefix(l, "+") {
					return
				}
			}
		}
		switch state % 4 {
		case 1:
			send("p LOGIN " + alice + " " + alicePW + "\r\n")
		case 2:
			send("p LOGIN " + alice + " " + alicePW + "\r\n")
			send("p SELECT INBOX\r\n")
		case 3:
			send("p LOGIN " + alice + " " + alicePW + "\r\n")
			send(fmt.Sprintf("p APPEND INBOX.Fuzz {%d}\r\n", len(input)))
		}
		c.Write(input)
		c.Write([]byte("\r\nz LOGOUT\r\n"))
		for {
			if _, err := r.ReadString('\n'); err != nil {
				break
			}
		}
		if panics := plog.Seen(); len(panics) > 0 {
			t.Fatalf("the server panicked: %v", panics)
		}
		// Still serving.
		c2, err := net.DialTimeout("tcp", e.addr, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		c2.SetDeadline(time.Now().Add(5 * time.Second))
		if g, _ := bufio.NewReader(c2).ReadString('\n'); !strings.HasPrefix(g, "* OK") {
			t.Fatalf("after the input, a new client got %q", g)
		}
		c2.Close()
	})
}
