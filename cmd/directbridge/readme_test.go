package main

import (
	"bytes"
	"os"
	"regexp"
	"testing"
)

// TestREADMEListsEveryVariable keeps README's configuration table true:
// every variable the binary reads (as `directbridge help` lists them) has
// a row there.
func TestREADMEListsEveryVariable(t *testing.T) {
	var out, errOut bytes.Buffer
	if code := run([]string{"help"}, &out, &errOut); code != 0 {
		t.Fatalf("help exit %d", code)
	}
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	vars := regexp.MustCompile(`(?m)^(DIRECTBRIDGE_[A-Z0-9_]+)`).FindAllString(out.String(), -1)
	if len(vars) < 20 {
		t.Fatalf("help lists only %d variables", len(vars))
	}
	for _, v := range vars {
		if !bytes.Contains(readme, []byte("`"+v+"`")) {
			t.Errorf("README's configuration table lacks %s", v)
		}
	}
}
