package agentapi

import (
	"errors"
	"strings"
	"testing"

	"github.com/agentbridge/bridge/translate"
)

func TestDecodeRequestRejectsInvalidUTF8(t *testing.T) {
	_, err := DecodeRequest([]byte("{\"input\":[{\"role\":\"user\",\"content\":[]}],\"session_id\":\"\xf1\"}"))
	if !errors.Is(err, translate.ErrBadRequest) || !strings.Contains(err.Error(), "UTF-8") {
		t.Fatalf("%v", err)
	}
}
