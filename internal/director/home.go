package director

import (
	"crypto/sha256"
	"encoding/binary"
)

// Members returns the replicas alive now that accept links, by id, with
// the address each accepts them at (this replica included when it
// accepts them), and this replica's id.
type Members func() (self string, addrs map[string]string)

// home picks user's home among addrs by rendezvous hashing: the replica
// whose hash with the user is highest. Every replica that sees the same
// members picks the same home, and when a replica comes or goes only
// the users whose home it is move.
func home(user string, addrs map[string]string) (id string) {
	var best uint64
	for r := range addrs {
		h := sha256.Sum256([]byte(user + "\x00" + r))
		s := binary.BigEndian.Uint64(h[:8])
		if id == "" || s > best || s == best && r > id {
			id, best = r, s
		}
	}
	return id
}
