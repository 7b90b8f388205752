package downstream

import (
	"crypto/rand"
	"fmt"
)

// newID returns prefix followed by a random UUID (version 4), the shape of
// the ids the Agent API runtime itself makes.
func newID(prefix string) string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%s%x-%x-%x-%x-%x", prefix, b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}
