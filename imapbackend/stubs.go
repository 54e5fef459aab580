package imapbackend

// Stubs of the commands being written in their own files; each is replaced
// by its real implementation and this file is deleted.

import (
	"github.com/emersion/go-imap/v2"
	"github.com/emersion/go-imap/v2/imapserver"
)

var errNotYet = no(imap.ResponseCodeCannot, "not implemented yet")

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
func (s *session) Append(string, imap.LiteralReader, *imap.AppendOptions) (*imap.AppendData, error) {
	return nil, errNotYet
}
func (s *session) Expunge(*imapserver.ExpungeWriter, *imap.UIDSet) error { return errNotYet }
func (s *session) Search(imapserver.NumKind, *imap.SearchCriteria, *imap.SearchOptions) (*imap.SearchData, error) {
	return nil, errNotYet
}
func (s *session) Fetch(*imapserver.FetchWriter, imap.NumSet, *imap.FetchOptions) error {
	return errNotYet
}
func (s *session) Store(*imapserver.FetchWriter, imap.NumSet, *imap.StoreFlags, *imap.StoreOptions) error {
	return errNotYet
}
func (s *session) Copy(imap.NumSet, string) (*imap.CopyData, error)       { return nil, errNotYet }
func (s *session) Move(*imapserver.MoveWriter, imap.NumSet, string) error { return errNotYet }
