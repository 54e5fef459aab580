package peerfetch

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"fmt"
)

// keyLabel is the HKDF info of the exchange's key: a key of its own,
// never the journal key itself.
const keyLabel = "directbridge peerfetch v1"

// Additional data of the two directions: a request cannot pass for an
// answer, nor the other way round.
const (
	requestAD = "directbridge peerfetch request v1"
	answerAD  = "directbridge peerfetch answer v1\x00"
)

// errSeal is a message that does not open under the key: not from a
// replica of this cluster, changed on the way, or replayed as an answer
// to another request.
var errSeal = errors.New("peerfetch: the message does not open under the cluster's key")

// sealer seals and opens the exchange's messages.
type sealer struct{ aead cipher.AEAD }

// newSealer derives the exchange's key from the journal key.
func newSealer(journalKey []byte) (*sealer, error) {
	if len(journalKey) < 16 {
		return nil, fmt.Errorf("peerfetch: a journal key of %d bytes is too short", len(journalKey))
	}
	key, err := hkdf.Key(sha256.New, journalKey, nil, keyLabel, 32)
	if err != nil {
		return nil, fmt.Errorf("peerfetch: deriving the key: %w", err)
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, fmt.Errorf("peerfetch: %w", err)
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, fmt.Errorf("peerfetch: %w", err)
	}
	return &sealer{aead: aead}, nil
}

// seal returns a fresh nonce followed by plain sealed under ad.
func (s *sealer) seal(plain []byte, ad []byte) []byte {
	n := s.aead.NonceSize()
	out := make([]byte, n, n+len(plain)+s.aead.Overhead())
	rand.Read(out) // never fails (crypto/rand, Go 1.24)
	return s.aead.Seal(out, out[:n], plain, ad)
}

// sealInPlace seals buf[n:] (n the nonce size) in place, with a fresh
// nonce written into buf[:n], and returns the sealed message.
func (s *sealer) sealInPlace(buf []byte, ad []byte) []byte {
	n := s.aead.NonceSize()
	rand.Read(buf[:n]) // never fails (crypto/rand, Go 1.24)
	return s.aead.Seal(buf[:n], buf[:n], buf[n:], ad)
}

// open returns what sealed holds, and its nonce.
func (s *sealer) open(sealed []byte, ad []byte) (plain, nonce []byte, err error) {
	n := s.aead.NonceSize()
	if len(sealed) < n+s.aead.Overhead() {
		return nil, nil, errSeal
	}
	plain, err = s.aead.Open(nil, sealed[:n], sealed[n:], ad)
	if err != nil {
		return nil, nil, errSeal
	}
	return plain, sealed[:n], nil
}

// answerADFor is the additional data of the answer to the request whose
// nonce is nonce.
func answerADFor(nonce []byte) []byte {
	return append([]byte(answerAD), nonce...)
}
