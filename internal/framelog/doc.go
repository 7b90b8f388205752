// Package framelog keeps the raw frames of recent exchanges in memory, for
// the admin page's side-by-side view of what came in, what the bridge made
// of it, and what went out.
//
// A Log is a downstream.FrameRecorder: the downstream server and the
// upstream clients hand it every frame of an exchange (the client's request,
// each frame sent back to the client, the request to the agent and each
// frame from it). It is bounded three ways: frames kept per exchange (the
// oldest are dropped first, and counted), exchanges kept in all (the one
// recorded to least recently is forgotten first), and bytes kept of one
// frame (the rest is cut, and the cut is flagged). Record copies what it
// keeps, so callers may reuse their buffers at once; Frames returns copies.
// A Log is safe for concurrent use.
package framelog
