package seqview

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/emersion/go-imap/v2"
)

// script runs a small command language against a Mailbox that starts with
// messages 1, 2 and 3, all \Seen and not recent, and returns what the
// commands that answer something answered, joined by " / ". Commands,
// separated by ";":
//
//	open A | examine A | open2 A (IMAP4rev2) | close A    sessions
//	add U [flag...]                                       provider: new message
//	exp U[,U...]                                          provider: expunge
//	set U [flag...]                                       provider: flags
//	store A U +|-|= [flag...]                             A stores, answer queued
//	silent A U +|-|= [flag...]                            A stores .SILENT
//	upd A | updx A                                        Updates(true | false)
//	fetch A U                                             FetchFlags
//	res A seqset | ures A uidset                          Resolve
//	status | gone
func script(t *testing.T, cmds string) string {
	t.Helper()
	mb := NewMailbox(Config{UIDValidity: 7, UIDNext: 4, RecentFrom: 4})
	if err := mb.Add(NewMessage{UID: 1, Flags: []imap.Flag{imap.FlagSeen}}, NewMessage{UID: 2, Flags: []imap.Flag{imap.FlagSeen}},
		NewMessage{UID: 3, Flags: []imap.Flag{imap.FlagSeen}}); err != nil {
		t.Fatal(err)
	}
	views := map[string]*View{}
	var out []string
	flags := func(fs []string) []imap.Flag {
		out := make([]imap.Flag, len(fs))
		for i, f := range fs {
			out[i] = imap.Flag(f)
		}
		return out
	}
	uid := func(s string) imap.UID {
		n, err := strconv.ParseUint(s, 10, 32)
		if err != nil {
			t.Fatalf("bad UID %q", s)
		}
		return imap.UID(n)
	}
	view := func(name string) *View {
		v := views[name]
		if v == nil {
			t.Fatalf("no session %s", name)
		}
		return v
	}
	for _, cmd := range strings.Split(cmds, ";") {
		f := strings.Fields(cmd)
		if len(f) == 0 {
			continue
		}
		switch f[0] {
		case "open", "examine", "open2":
			v, data, err := mb.Open(ViewOptions{ReadOnly: f[0] == "examine", Rev2: f[0] == "open2"})
			if err != nil {
				out = append(out, "open: "+err.Error())
				continue
			}
			views[f[1]] = v
			out = append(out, fmt.Sprintf("%d EXISTS %d RECENT UNSEEN %d FLAGS %v PERM %v", data.NumMessages,
				data.NumRecent, data.FirstUnseenSeqNum, data.Flags, data.PermanentFlags))
		case "close":
			view(f[1]).Close()
		case "add":
			if err := mb.Add(NewMessage{UID: uid(f[1]), Flags: flags(f[2:])}); err != nil {
				out = append(out, "add: "+err.Error())
			}
		case "exp":
			var uids []imap.UID
			for _, s := range strings.Split(f[1], ",") {
				uids = append(uids, uid(s))
			}
			mb.Expunge(uids...)
		case "set":
			mb.SetFlags(nil, FlagChange{UID: uid(f[1]), Op: imap.StoreFlagsSet, Flags: flags(f[2:])})
		case "store", "silent":
			v := view(f[1])
			op := map[string]imap.StoreFlagsOp{"+": imap.StoreFlagsAdd, "-": imap.StoreFlagsDel, "=": imap.StoreFlagsSet}[f[3]]
			mb.SetFlags(v, FlagChange{UID: uid(f[2]), Op: op, Flags: flags(f[4:])})
			if f[0] == "store" {
				v.QueueFetch(uid(f[2]))
			}
		case "upd", "updx":
			rs, err := view(f[1]).Updates(f[0] == "upd")
			if err != nil {
				out = append(out, err.Error())
				continue
			}
			var s []string
			for _, r := range rs {
				s = append(s, r.String())
			}
			out = append(out, strings.Join(s, ", "))
		case "fetch":
			out = append(out, fmt.Sprint(view(f[1]).FetchFlags(uid(f[2]))[0]))
		case "res", "ures":
			var set imap.NumSet = parseSeqSet(t, f[2])
			if f[0] == "ures" {
				var us imap.UIDSet
				for _, r := range set.(imap.SeqSet) {
					us = append(us, imap.UIDRange{Start: imap.UID(r.Start), Stop: imap.UID(r.Stop)})
				}
				set = us
			}
			ts, err := view(f[1]).Resolve(set)
			if err != nil {
				out = append(out, "BAD")
				continue
			}
			var s []string
			for _, tg := range ts {
				x := fmt.Sprintf("%d:%d", tg.Seq, tg.UID)
				if !tg.Live {
					x += "x"
				}
				s = append(s, x)
			}
			out = append(out, strings.Join(s, " "))
		case "status":
			st := mb.Status()
			out = append(out, fmt.Sprintf("%d msgs %d recent %d unseen %d deleted next %d", st.Messages, st.Recent,
				st.Unseen, st.Deleted, st.UIDNext))
		case "gone":
			mb.Gone()
		default:
			t.Fatalf("unknown command %q", cmd)
		}
	}
	return strings.Join(out, " / ")
}

// The protocol cases, one per line. The SELECT answer of "open" is kept
// short by starting the scripts with the sessions opened where it does not
// matter.
func TestProtocolCases(t *testing.T) {
	const sel = `3 EXISTS 0 RECENT UNSEEN 0 FLAGS [\Seen \Answered \Flagged \Deleted \Draft] PERM [\Seen \Answered \Flagged \Deleted \Draft \*]`
	cases := []struct{ name, script, want string }{
		{"select answer", "open a", sel},
		{"examine has no PERMANENTFLAGS", "examine a", `3 EXISTS 0 RECENT UNSEEN 0 FLAGS [\Seen \Answered \Flagged \Deleted \Draft] PERM []`},
		{"select counts recent and first unseen", "add 4; add 5 \\Seen; open a", `5 EXISTS 2 RECENT UNSEEN 4 FLAGS [\Seen \Answered \Flagged \Deleted \Draft] PERM [\Seen \Answered \Flagged \Deleted \Draft \*]`},
		{"nothing to say", "open a; upd a", sel + " / "},
		{"one EXISTS for several messages, with RECENT", "open a; add 4; add 5; upd a", sel + " / * 5 EXISTS, * 2 RECENT"},
		{"no RECENT under IMAP4rev2", "open2 a; add 4; upd a", sel + " / * 4 EXISTS"},
		{"\\Recent only to the first read-write session", "open a; open b; add 4; upd b; upd a; fetch a 4; fetch b 4", sel + " / " + sel + ` / * 4 EXISTS, * 1 RECENT / * 4 EXISTS, * 0 RECENT / [] / [\Recent]`},
		{"examine sees recent without taking it", "examine r; open a; add 4; upd r; upd a; fetch r 4; fetch a 4", `3 EXISTS 0 RECENT UNSEEN 0 FLAGS [\Seen \Answered \Flagged \Deleted \Draft] PERM [] / ` + sel + ` / * 4 EXISTS, * 1 RECENT / * 4 EXISTS, * 1 RECENT / [\Recent] / [\Recent]`},
		{"select takes recent, a second select does not get it", "add 4; open a; open b; fetch a 4; fetch b 4", `4 EXISTS 1 RECENT UNSEEN 4 FLAGS [\Seen \Answered \Flagged \Deleted \Draft] PERM [\Seen \Answered \Flagged \Deleted \Draft \*] / 4 EXISTS 0 RECENT UNSEEN 4 FLAGS [\Seen \Answered \Flagged \Deleted \Draft] PERM [\Seen \Answered \Flagged \Deleted \Draft \*] / [\Recent] / []`},
		{"status recent counts untaken", "add 4; add 5; status; open a; status", "5 msgs 2 recent 2 unseen 0 deleted next 6 / " + sel[:0] + `5 EXISTS 2 RECENT UNSEEN 4 FLAGS [\Seen \Answered \Flagged \Deleted \Draft] PERM [\Seen \Answered \Flagged \Deleted \Draft \*] / 5 msgs 0 recent 2 unseen 0 deleted next 6`},
		{"EXPUNGE numbers are right when sent", "open a; exp 1,3; upd a", sel + " / * 3 EXPUNGE, * 1 EXPUNGE"},
		{"EXPUNGE withheld during FETCH, sent after", "open a; exp 2; updx a; upd a", sel + " /  / * 2 EXPUNGE"},
		{"expunged message still resolves until told", "open a; exp 2; res a 1:*; fetch a 2; upd a; res a 1:*", sel + ` / 1:1 2:2x 3:3 / [\Seen] / * 2 EXPUNGE / 1:1 2:3`},
		{"EXISTS goes out while EXPUNGE withheld, counting it", "open a; exp 2; add 4; updx a; res a 4; upd a", sel + ` / * 4 EXISTS, * 1 RECENT / 4:4 / * 2 EXPUNGE`},
		{"new then expunged message is never announced", "open a; add 4; exp 4; upd a", sel + " / "},
		{"flag change by another session", "open a; open b; store b 2 + \\Flagged; upd a; upd b", sel + " / " + sel + ` / * 2 FETCH (UID 2 FLAGS (\Flagged \Seen)) / * 2 FETCH (UID 2 FLAGS (\Flagged \Seen))`},
		{"silent store answers nothing to its session", "open a; open b; silent b 2 + \\Flagged; upd b; upd a", sel + " / " + sel + ` /  / * 2 FETCH (UID 2 FLAGS (\Flagged \Seen))`},
		{"one FETCH per message for several changes", "open a; set 2 \\Flagged; set 2 \\Seen; set 2; upd a", sel + " / * 2 FETCH (UID 2 FLAGS ())"},
		{"FETCH goes out during FETCH, with old numbers", "open a; exp 1; set 3 \\Draft; updx a; upd a", sel + ` / * 3 FETCH (UID 3 FLAGS (\Draft)) / * 1 EXPUNGE`},
		{"FETCH after EXPUNGE uses the new numbers", "open a; exp 1; set 3 \\Draft; upd a", sel + ` / * 1 EXPUNGE, * 2 FETCH (UID 3 FLAGS (\Draft))`},
		{"no FETCH for a message being expunged", "open a; set 2 \\Draft; exp 2; upd a", sel + " / * 2 EXPUNGE"},
		{"new keyword: FLAGS before FETCH", "open a; set 2 $Work; upd a", sel + ` / * FLAGS (\Seen \Answered \Flagged \Deleted \Draft $Work), * 2 FETCH (UID 2 FLAGS ($Work))`},
		{"new keyword in a new message: FLAGS first", "open a; add 4 $x; upd a; fetch a 4", sel + ` / * FLAGS (\Seen \Answered \Flagged \Deleted \Draft $x), * 4 EXISTS, * 1 RECENT / [$x \Recent]`},
		{"FETCH leaves out an unannounced keyword, then FLAGS and FETCH follow", "open a; open b; store b 2 + $New; fetch a 2; updx a", sel + " / " + sel + ` / [\Seen] / * FLAGS (\Seen \Answered \Flagged \Deleted \Draft $New), * 2 FETCH (UID 2 FLAGS ($New \Seen))`},
		{"own STORE: FLAGS then FETCH", "open a; store a 1 + $k; updx a", sel + ` / * FLAGS (\Seen \Answered \Flagged \Deleted \Draft $k), * 1 FETCH (UID 1 FLAGS ($k \Seen))`},
		{"keyword kept in FLAGS after its last use goes", "open a; set 2 $k; upd a; set 2; upd a", sel + ` / * FLAGS (\Seen \Answered \Flagged \Deleted \Draft $k), * 2 FETCH (UID 2 FLAGS ($k)) / * 2 FETCH (UID 2 FLAGS ())`},
		{"keyword of an expunged message stays while shown", "open a; set 2 $k; upd a; exp 2; updx a; fetch a 2", sel + ` / * FLAGS (\Seen \Answered \Flagged \Deleted \Draft $k), * 2 FETCH (UID 2 FLAGS ($k)) /  / [$k]`},
		{"unused keywords forgotten when nobody has the folder open", "open a; set 2 $k; set 2 \\Seen; close a; open b", sel + " / " + sel},
		{"unused keyword kept while another session is open", "open a; set 2 $k; upd a; set 2 \\Seen; open b", sel + ` / * FLAGS (\Seen \Answered \Flagged \Deleted \Draft $k), * 2 FETCH (UID 2 FLAGS ($k)) / 3 EXISTS 0 RECENT UNSEEN 0 FLAGS [\Seen \Answered \Flagged \Deleted \Draft $k] PERM [\Seen \Answered \Flagged \Deleted \Draft $k \*]`},
		{"system flags canonical", "open a; set 2 \\seen \\FLAGGED $junk; upd a", sel + ` / * FLAGS (\Seen \Answered \Flagged \Deleted \Draft $Junk), * 2 FETCH (UID 2 FLAGS ($Junk \Flagged \Seen))`},
		{"\\Recent is never stored", "open a; set 2 \\Recent; upd a", sel + ` / * 2 FETCH (UID 2 FLAGS ())`},
		{"sequence number beyond what the client was told is BAD", "open a; add 4; res a 4", sel + " / BAD"},
		{"* is the last message told", "open a; add 4; res a *", sel + " / 3:3"},
		{"ranges are unordered", "open a; res a 3:1", sel + " / 1:1 2:2 3:3"},
		{"10:* with fewer messages is BAD", "open a; res a 10:*", sel + " / BAD"},
		{"empty view: any sequence set is BAD", "open a; exp 1,2,3; upd a; res a *", sel + " / * 3 EXPUNGE, * 2 EXPUNGE, * 1 EXPUNGE / BAD"},
		{"UID set names messages not told yet", "open a; add 4; ures a 2:*", sel + " / 2:2 3:3 0:4"},
		{"UID set skips UIDs that do not exist", "open a; ures a 5:9,2", sel + " / 2:2"},
		{"UID * is the folder's largest UID", "open a; add 7; ures a *", sel + " / 0:7"},
		{"UID set names an expunged message still shown", "open a; exp 2; ures a 1:*", sel + " / 1:1 2:2x 3:3"},
		{"UID set duplicates", "open a; ures a 1:2,2:3,1", sel + " / 1:1 2:2 3:3"},
		{"STORE on a message not told yet: EXISTS then FETCH", "open a; add 4; store a 4 + \\Flagged; updx a", sel + ` / * 4 EXISTS, * 1 RECENT, * 4 FETCH (UID 4 FLAGS (\Flagged \Recent))`},
		{"folder gone", "open a; gone; upd a; open b", sel + " / " + ErrGone.Error() + " / open: " + ErrGone.Error()},
		{"UIDs must ascend", "add 3", "add: seqview: new UIDs must ascend above every known UID: 3 after 3"},
		{"UIDs are never reused", "exp 3; add 3", "add: seqview: new UIDs must ascend above every known UID: 3 after 3"},
		{"closed view", "open a; close a; upd a", sel + " / " + ErrClosed.Error()},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := script(t, c.script); got != c.want {
				t.Errorf("%s\n got: %s\nwant: %s", c.script, got, c.want)
			}
		})
	}
}

func TestResolveSearchRes(t *testing.T) {
	mb := NewMailbox(Config{})
	v, _, err := mb.Open(ViewOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := v.Resolve(imap.SearchRes()); !errors.Is(err, ErrSearchRes) {
		t.Fatalf("Resolve($) = %v, want ErrSearchRes", err)
	}
}

// parseSeqSet reads "1:3,5,7:*" ("*" is 0, as go-imap keeps it).
func parseSeqSet(t *testing.T, s string) imap.SeqSet {
	num := func(x string) uint32 {
		if x == "*" {
			return 0
		}
		n, err := strconv.ParseUint(x, 10, 32)
		if err != nil || n == 0 {
			t.Fatalf("bad number %q", x)
		}
		return uint32(n)
	}
	var out imap.SeqSet
	for _, r := range strings.Split(s, ",") {
		a, b, ok := strings.Cut(r, ":")
		if !ok {
			b = a
		}
		out = append(out, imap.SeqRange{Start: num(a), Stop: num(b)})
	}
	return out
}

// A session that takes every new message keeps one range of \Recent
// however sparse the UIDs, and the count stays right.
func TestRecentRangesMerge(t *testing.T) {
	mb := NewMailbox(Config{RecentFrom: 1})
	if err := mb.Add(NewMessage{UID: 1}); err != nil {
		t.Fatal(err)
	}
	v, _, err := mb.Open(ViewOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ro, _, err := mb.Open(ViewOptions{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 100 {
		if err := mb.Add(NewMessage{UID: imap.UID(10 + 3*i)}); err != nil {
			t.Fatal(err)
		}
		if _, err := v.Updates(true); err != nil {
			t.Fatal(err)
		}
		if i%10 == 0 {
			if _, err := ro.Updates(true); err != nil {
				t.Fatal(err)
			}
		}
	}
	if len(v.recent) != 1 || v.NumRecent() != 101 {
		t.Errorf("read-write view: %d ranges, %d recent; want 1 range, 101 recent", len(v.recent), v.NumRecent())
	}
	// The read-only view was opened after the read-write one took message
	// 1 and looked at each new message after the read-write one took it:
	// none is recent there.
	if n := ro.NumRecent(); n != 0 {
		t.Errorf("read-only view: %d recent, want 0", n)
	}
}
