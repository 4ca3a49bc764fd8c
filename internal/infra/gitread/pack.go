package gitread

import (
	"crypto"
	"errors"
	"hash"
	"strconv"

	"github.com/go-git/go-git/v5/plumbing"
	gghash "github.com/go-git/go-git/v5/plumbing/hash"
)

// ErrCorrupt is wrapped by every error about data that breaks the pack,
// index or delta format.
var ErrCorrupt = errors.New("corrupt object data")

// Pack entry types (the 3 type bits of an entry header).
const (
	TypeCommit   = 1
	TypeTree     = 2
	TypeBlob     = 3
	TypeTag      = 4
	TypeOfsDelta = 6
	TypeRefDelta = 7
)

const hashSize = 20 // SHA-1 repositories only

func isDelta(t uint8) bool { return t == TypeOfsDelta || t == TypeRefDelta }

var typeNames = [...]string{TypeCommit: "commit", TypeTree: "tree", TypeBlob: "blob", TypeTag: "tag"}

// hasher computes object names: the SHA-1 of "<type> <size>\x00<content>",
// with go-git's configured SHA-1 (collision-detecting sha1cd by default).
type hasher struct {
	h   hash.Hash
	hdr []byte
	sum []byte
}

func newHasher() *hasher {
	return &hasher{h: gghash.New(crypto.SHA1), hdr: make([]byte, 0, 32), sum: make([]byte, 0, 32)}
}

// begin starts the name of an object of type t and size bytes; write its
// content with h.h.Write, then call end.
func (h *hasher) begin(t uint8, size int64) {
	h.h.Reset()
	h.hdr = append(h.hdr[:0], typeNames[t]...)
	h.hdr = append(h.hdr, ' ')
	h.hdr = strconv.AppendInt(h.hdr, size, 10)
	h.hdr = append(h.hdr, 0)
	h.h.Write(h.hdr)
}

func (h *hasher) end() (out plumbing.Hash) {
	h.sum = h.h.Sum(h.sum[:0])
	copy(out[:], h.sum)
	return out
}

func (h *hasher) object(t uint8, data []byte) plumbing.Hash {
	h.begin(t, int64(len(data)))
	h.h.Write(data)
	return h.end()
}
