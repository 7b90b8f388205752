// Package jsonw holds the JSON writing primitives the protocol codecs share:
// string literals and compaction, written by appending to a byte slice so
// the hot paths allocate nothing.
package jsonw
