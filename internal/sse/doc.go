// Package sse reads and writes Server-Sent Events framing as the agents and
// clients of the bridge actually produce it.
//
// The Reader is lenient: "data:" with or without a space, LF or CRLF line
// ends, comment lines, multi-line data joined with "\n", a last event that
// ends at EOF without its blank line. It bounds the size of one event so that
// a peer cannot grow memory without limit.
//
// The writing helpers are strict: "data: <payload>\n\n" with an optional
// "id:" and "event:" line, which is what every client of every protocol here
// parses.
package sse
