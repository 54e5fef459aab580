package main

import (
	"bytes"
	"os"
	"path/filepath"
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

// TestDeployFilesUseRealVariables keeps deploy/ consistent with the
// binary: every DIRECTBRIDGE_ variable the deployment files set is one the
// binary reads.
func TestDeployFilesUseRealVariables(t *testing.T) {
	var out, errOut bytes.Buffer
	run([]string{"help"}, &out, &errOut)
	known := map[string]bool{"DIRECTBRIDGE_ADMIN_PASSWORD": true} // read by `directbridge admin`, not the daemon
	for _, v := range regexp.MustCompile(`(?m)^(DIRECTBRIDGE_[A-Z0-9_]+)`).FindAllString(out.String(), -1) {
		known[v] = true
	}
	files, err := filepath.Glob("../../deploy/*")
	if err != nil {
		t.Fatal(err)
	}
	more, _ := filepath.Glob("../../deploy/*/*")
	checked := 0
	for _, f := range append(files, more...) {
		data, err := os.ReadFile(f)
		if err != nil {
			continue // a directory
		}
		for _, v := range regexp.MustCompile(`DIRECTBRIDGE_[A-Z0-9_]+`).FindAllString(string(data), -1) {
			checked++
			if !known[v] {
				t.Errorf("%s sets %s, which the binary does not read", filepath.Base(f), v)
			}
		}
	}
	if checked < 10 {
		t.Fatalf("only %d variables found in deploy/", checked)
	}
}
