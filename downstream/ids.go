package downstream

import "github.com/agentbridge/bridge/internal/ids"

// newID returns prefix followed by a random UUID (version 4), the shape of
// the ids the Agent API runtime itself makes.
func newID(prefix string) string { return prefix + ids.UUID() }
