package mimeconv

import (
	"fmt"
	"testing"
)

func TestAddresses(t *testing.T) {
	cases := []struct {
		value string
		want  []string
	}{
		{"", nil},
		{"   ", nil},
		{"alice@direct.example", []string{"alice@direct.example"}},
		{"Alice <alice@direct.example>, bob@direct.example", []string{"alice@direct.example", "bob@direct.example"}},
		{`"Meier, Jörg" <joerg@direct.example>`, []string{"joerg@direct.example"}},
		{"=?ISO-8859-1?Q?Andr=E9?= Pirard <PIRARD@vm1.ulg.ac.be>", []string{"PIRARD@vm1.ulg.ac.be"}},
		{"Team: a@x.example, b@x.example;, c@x.example", []string{"a@x.example", "b@x.example", "c@x.example"}},
		{"undisclosed-recipients:;", nil},
		// Malformed lists from the wild.
		{"<test@dome.domain>,", []string{"test@dome.domain"}},
		{"a@x.example,, ,b@x.example", []string{"a@x.example", "b@x.example"}},
		{"<gussie@nhind.example>,<biff@nhind.example>", []string{"gussie@nhind.example", "biff@nhind.example"}},
		{"Dr. Who <who@x.example>, Smith, John <john@x.example>", []string{"who@x.example", "john@x.example"}},
		{"=?x-unknown?q?Name?= <u@x.example>, plain@x.example", []string{"u@x.example", "plain@x.example"}},
		{"bob@x.example (Bob, the builder), carol@x.example", []string{"bob@x.example", "carol@x.example"}},
		{"not an address, also not", nil},
		{"<no at sign>, <a b@x.example>, ok@x.example", []string{"ok@x.example"}},
		{"<unterminated@x.example", []string{"unterminated@x.example"}},
	}
	for _, tc := range cases {
		if got := Addresses(tc.value); fmt.Sprint(got) != fmt.Sprint(tc.want) {
			t.Errorf("Addresses(%q) = %q, want %q", tc.value, got, tc.want)
		}
	}
}
