package imapbackend

// Stubs replaced by folders.go, list.go and status.go; delete this file then.

import (
	"github.com/emersion/go-imap/v2"
	"github.com/emersion/go-imap/v2/imapserver"
)

func (s *session) Create(string, *imap.CreateOptions) error         { return errNotYet }
func (s *session) Delete(string) error                              { return errNotYet }
func (s *session) Rename(string, string, *imap.RenameOptions) error { return errNotYet }
func (s *session) Subscribe(string) error                           { return errNotYet }
func (s *session) Unsubscribe(string) error                         { return errNotYet }
func (s *session) List(*imapserver.ListWriter, string, []string, *imap.ListOptions) error {
	return errNotYet
}
func (s *session) Status(string, *imap.StatusOptions) (*imap.StatusData, error) {
	return nil, errNotYet
}
