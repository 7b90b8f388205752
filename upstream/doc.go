// Package upstream holds the clients that call agents in their native
// protocol. Each client is a translate.Agent: it encodes a canonical Request
// in its protocol, sends it, and returns the agent's reply as a canonical
// Stream.
//
// Every client sits behind a Breaker (sony/gobreaker, two-step, so a stream is
// judged when it ends rather than when its headers arrive) and four timeouts:
// connect, first byte (the response header), idle (the longest silence
// between bytes of a stream) and total (unary calls only: a healthy stream is
// never cut by it). The fasthttp client's implicit retries are off, so the
// breaker sees every true outcome.
//
// Lifetime: a Stream returned by Open must be closed. Close may be called
// from another goroutine to end a Next in progress; the connection of a
// stream that was not read to its end is closed, never reused.
package upstream
