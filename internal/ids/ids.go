package ids

import (
	"crypto/rand"
	"encoding/hex"
)

// UUID returns a random version-4 UUID in its canonical text form, the
// shape of the ids the Agent API runtime makes.
func UUID() string {
	var u [16]byte
	_, _ = rand.Read(u[:]) // crypto/rand.Read does not fail (Go 1.24+)
	u[6] = u[6]&0x0f | 0x40
	u[8] = u[8]&0x3f | 0x80
	var b [36]byte
	hex.Encode(b[0:8], u[0:4])
	b[8] = '-'
	hex.Encode(b[9:13], u[4:6])
	b[13] = '-'
	hex.Encode(b[14:18], u[6:8])
	b[18] = '-'
	hex.Encode(b[19:23], u[8:10])
	b[23] = '-'
	hex.Encode(b[24:36], u[10:16])
	return string(b[:])
}

// Hex returns n random bytes as 2n hex digits.
func Hex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
