// Package mapping is the bridge's configuration: the listener, the upstream
// agents, and the routes between them. A Config is parsed and validated
// whole (Load, Parse, Validate) so that a reload can swap it atomically or
// reject it without touching the one in service. It does no I/O besides
// reading the file in Load, and builds nothing: cmd/bridge turns a valid
// Config into servers and clients.
package mapping
