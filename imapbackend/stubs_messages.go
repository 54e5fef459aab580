package imapbackend

// Stubs replaced by store.go, copy.go, expunge.go and append.go; delete
// this file then.

import (
	"github.com/emersion/go-imap/v2"
	"github.com/emersion/go-imap/v2/imapserver"
)

func (s *session) Append(string, imap.LiteralReader, *imap.AppendOptions) (*imap.AppendData, error) {
	return nil, errNotYet
}
func (s *session) Expunge(*imapserver.ExpungeWriter, *imap.UIDSet) error { return errNotYet }
func (s *session) Store(*imapserver.FetchWriter, imap.NumSet, *imap.StoreFlags, *imap.StoreOptions) error {
	return errNotYet
}
func (s *session) Copy(imap.NumSet, string) (*imap.CopyData, error)       { return nil, errNotYet }
func (s *session) Move(*imapserver.MoveWriter, imap.NumSet, string) error { return errNotYet }
