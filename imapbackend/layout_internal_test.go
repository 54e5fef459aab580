package imapbackend

import (
	"testing"
)

// TestLayoutNames: each layout maps provider names to IMAP names and
// back one to one; names a layout cannot show or take are refused.
func TestLayoutNames(t *testing.T) {
	for _, tc := range []struct {
		layout   Layout
		provider string
		imap     string
	}{
		{LayoutInbox, "INBOX", "INBOX"},
		{LayoutInbox, "INBOX.Sent", "INBOX.Sent"},
		{LayoutInbox, "INBOX.Work.Q3", "INBOX.Work.Q3"},
		{LayoutFlat, "INBOX", "INBOX"},
		{LayoutFlat, "INBOX.Sent", "Sent"},
		{LayoutFlat, "INBOX.Work.Q3", "Work.Q3"},
		{LayoutFlat, "INBOX.Two Words", "Two Words"},
		{LayoutFlat, "INBOX.Inboxes", "Inboxes"},
	} {
		got, ok := tc.layout.imapName(tc.provider)
		if !ok || got != tc.imap {
			t.Errorf("%s imapName(%q) = %q, %v; want %q", tc.layout, tc.provider, got, ok, tc.imap)
		}
		back, err := tc.layout.providerName(tc.imap)
		if err != nil || back != tc.provider {
			t.Errorf("%s providerName(%q) = %q, %v; want %q", tc.layout, tc.imap, back, err, tc.provider)
		}
	}
	// Any case of INBOX is INBOX; in the INBOX layout also as a first level.
	for _, l := range []Layout{LayoutInbox, LayoutFlat} {
		if p, err := l.providerName("inBox"); err != nil || p != "INBOX" {
			t.Errorf("%s providerName(inBox) = %q, %v", l, p, err)
		}
	}
	if p, _ := LayoutInbox.providerName("inbox.Sent"); p != "INBOX.Sent" {
		t.Errorf("inbox providerName(inbox.Sent) = %q", p)
	}
	// An alias is taken at the top level of the INBOX layout too.
	if p, err := LayoutInbox.providerName("Sent Items"); err != nil || aliasTarget(p) != "INBOX.Sent" {
		t.Errorf("inbox providerName(Sent Items) = %q, %v; want the alias of INBOX.Sent", p, err)
	}
	// The flat layout shows no INBOX.INBOX... folder and takes no
	// INBOX.x name; neither layout takes empty levels.
	for _, p := range []string{"INBOX.INBOX", "INBOX.inbox.x"} {
		if n, ok := LayoutFlat.imapName(p); ok {
			t.Errorf("flat imapName(%q) = %q; want hidden", p, n)
		}
	}
	for _, tc := range []struct {
		layout Layout
		name   string
	}{
		{LayoutFlat, "INBOX.Sent"}, {LayoutFlat, "inbox.x"}, {LayoutFlat, ""}, {LayoutFlat, "a..b"},
		{LayoutFlat, "a."}, {LayoutFlat, ".a"}, {LayoutInbox, "Sent"}, {LayoutInbox, "INBOX..a"}, {LayoutInbox, "Sent Items.x"},
	} {
		if p, err := tc.layout.providerName(tc.name); err == nil {
			t.Errorf("%s providerName(%q) = %q; want refused", tc.layout, tc.name, p)
		}
	}
	// Aliases of the special folders, any case, relative to the prefix.
	for name, want := range map[string]string{
		"INBOX.Sent Items": "INBOX.Sent", "INBOX.deleted items": "INBOX.Trash", "INBOX.Junk E-mail": "INBOX.Spam",
		"INBOX.Work": "", "Sent Items": "",
	} {
		if got := aliasTarget(name); got != want {
			t.Errorf("aliasTarget(%q) = %q; want %q", name, got, want)
		}
	}
	if _, ok := ParseLayout("Flat"); !ok {
		t.Error("ParseLayout(Flat) refused")
	}
	if _, ok := ParseLayout("tree"); ok {
		t.Error("ParseLayout(tree) accepted")
	}
}
