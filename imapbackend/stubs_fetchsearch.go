package imapbackend

// Stubs replaced by fetch.go and search.go; delete this file then.

import (
	"github.com/emersion/go-imap/v2"
	"github.com/emersion/go-imap/v2/imapserver"
)

func (s *session) Search(imapserver.NumKind, *imap.SearchCriteria, *imap.SearchOptions) (*imap.SearchData, error) {
	return nil, errNotYet
}

func (s *session) Fetch(*imapserver.FetchWriter, imap.NumSet, *imap.FetchOptions) error {
	return errNotYet
}
