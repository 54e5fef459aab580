// Package archtest holds no code: its test checks that the import graph
// of the module is the one ARCHITECTURE.md draws, reading the rule from
// that file's table, so that the document and the code cannot drift
// apart.
package archtest
