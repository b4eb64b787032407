package drbdutils

import "bytes"

// day0Hex is a definition's day-0 current UUID in the tests.
const day0Hex = "1234567890ABCDE0"

// fixedRand is a random source that draws 0xABCDEF0123456781 (big-endian), then EOF.
func fixedRand() *bytes.Reader {
	return bytes.NewReader([]byte{0xAB, 0xCD, 0xEF, 0x01, 0x23, 0x45, 0x67, 0x81})
}
