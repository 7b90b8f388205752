// Package faultproxy is a fault-injecting fake upstream for tests and the
// soak command: it stands in front of a real agent server of any protocol
// (the reference agent, typically) and misbehaves on purpose, the ways real
// agents and networks do.
//
// The faults are HTTP- and SSE-level, so one proxy serves every protocol:
// refuse the connection, hang without answering, delay the answer, answer
// 5xx or 429 with Retry-After, answer garbage bytes, put invalid JSON into
// a stream, cut a stream after N events, or drip a stream byte by byte.
// Which fault applies is chosen per request by a func, so a test can fail
// the first calls and then recover, or pick faults at random.
package faultproxy
