package smtpbackend

import (
	"github.com/emersion/go-sasl"
)

// loginServer is the server side of the LOGIN mechanism
// (draft-murchison-sasl-login), which go-sasl does not provide and which
// Outlook and many EHR mail libraries still use. The client may send the
// username as the initial response.
type loginServer struct {
	step     int
	username string
	auth     func(username, password string) error
}

func newLoginServer(auth func(username, password string) error) sasl.Server {
	return &loginServer{auth: auth}
}

func (s *loginServer) Next(response []byte) (challenge []byte, done bool, err error) {
	switch s.step {
	case 0:
		s.step = 1
		if response == nil {
			return []byte("Username:"), false, nil
		}
		fallthrough
	case 1:
		s.username = string(response)
		s.step = 2
		return []byte("Password:"), false, nil
	default:
		return nil, true, s.auth(s.username, string(response))
	}
}
