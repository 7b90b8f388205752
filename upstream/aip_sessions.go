package upstream

import (
	"github.com/agentbridge/bridge/translate"
	"github.com/agentbridge/bridge/translate/aip"
)

// aipTask is a task an Open left waiting on the client: its id, the state
// it settled in, and the Tracker that already turned its history into
// events, so that the next Open of the session emits only what is new.
type aipTask struct {
	session string
	id      string
	state   translate.State
	tracker *aip.Tracker
}

func (t *aipTask) sessionKey() string { return t.session }

// inState accepts a waiting task in one of states.
func inState(states ...translate.State) func(*aipTask) bool {
	return func(t *aipTask) bool {
		for _, s := range states {
			if t.state == s {
				return true
			}
		}
		return false
	}
}
