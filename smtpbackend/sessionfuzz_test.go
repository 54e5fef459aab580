package smtpbackend_test

import (
	"bufio"
	"encoding/base64"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/directbridge/directbridge/internal/login"
	"github.com/directbridge/directbridge/internal/testlog"
	"github.com/directbridge/directbridge/smtpbackend"
)

// FuzzSMTPSession feeds arbitrary client input to the submission server
// over a real socket: before EHLO, after AUTH, and inside DATA (the
// shared hard messages are seeds there). The server must never panic,
// and must still greet a new client afterwards.
func FuzzSMTPSession(f *testing.F) {
	plog := &testlog.Panics{}
	h := newHarness(f, func(c *smtpbackend.Config) {
		c.Logger = slog.New(plog)
		c.Guard = login.NewGuard(login.GuardConfig{FreeFailures: 1 << 20, RefuseAfter: 1 << 21})
		c.DataIdle = time.Second
		c.SendTimeout = 5 * time.Second
	})
	for _, s := range []string{
		"EHLO x\r\n", "HELO x\r\nMAIL FROM:<a@b>\r\n", "EHLO x\r\nAUTH PLAIN\r\n*\r\n", "AUTH LOGIN\r\nYQ==\r\n\r\n",
		"MAIL FROM:<" + aliceAddr + "> SIZE=1 BODY=8BITMIME RET=HDRS ENVID=x\r\nRCPT TO:<" + bobAddr + "> NOTIFY=FAILURE,DELAY ORCPT=rfc822;x\r\nDATA\r\nSubject: x\r\n\r\nhi\r\n.\r\n",
		"RCPT TO:<>\r\n", "BDAT 10 LAST\r\n0123456789", "VRFY x\r\nEXPN y\r\nNOOP\r\nRSET\r\nHELP\r\n", "STARTTLS\r\n\x16\x03\x01",
		"\x00\xff\r\n", strings.Repeat("A", 2000) + "\r\n",
	} {
		for state := byte(0); state < 2; state++ {
			f.Add(state, []byte(s))
		}
	}
	f.Add(byte(2), []byte("From: "+aliceAddr+"\r\nTo: "+bobAddr+"\r\n\r\nhello\r\r\n.\r\n"))
	for _, name := range []string{"hard-missing-final-boundary.eml", "hard-multipart-without-boundary.eml", "hard-8bit-unencoded-filename.eml", "direct-mdn-processed.txt"} {
		if b, err := os.ReadFile(filepath.Join("testdata", "messages", name)); err == nil {
			f.Add(byte(2), append(b, "\r\n.\r\n"...))
		}
	}
	f.Fuzz(func(t *testing.T, state byte, input []byte) {
		c, err := net.DialTimeout("tcp", h.subAddr, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(1500 * time.Millisecond))
		r := bufio.NewReader(c)
		reply := func(cmd string) {
			if cmd != "" {
				fmt.Fprint(c, cmd)
			}
			for {
				l, err := r.ReadString('\n')
				if err != nil || len(l) < 4 || l[3] != '-' {
					return
				}
			}
		}
		reply("")
		if state%3 >= 1 {
			reply("EHLO fuzz.example\r\n")
			reply("AUTH PLAIN " + base64.StdEncoding.EncodeToString([]byte("\x00"+aliceAddr+"\x00"+passwords[aliceAddr])) + "\r\n")
		}
		if state%3 == 2 {
			reply("MAIL FROM:<" + aliceAddr + ">\r\n")
			reply("RCPT TO:<" + bobAddr + ">\r\n")
			reply("DATA\r\n")
		}
		c.Write(input)
		c.Write([]byte("\r\nQUIT\r\n"))
		for {
			if _, err := r.ReadString('\n'); err != nil {
				break
			}
		}
		if panics := plog.Seen(); len(panics) > 0 {
			t.Fatalf("the server panicked: %v", panics)
		}
		c2, err := net.DialTimeout("tcp", h.subAddr, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		c2.SetDeadline(time.Now().Add(5 * time.Second))
		if g, _ := bufio.NewReader(c2).ReadString('\n'); !strings.HasPrefix(g, "220") {
			t.Fatalf("after the input, a new client got %q", g)
		}
		c2.Close()
	})
}
