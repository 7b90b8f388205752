package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"strings"
	"time"

	"github.com/agentbridge/bridge/mapping"
	"github.com/agentbridge/bridge/translate"
	"github.com/agentbridge/bridge/upstream"
)

func cmdCall(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("call", "call --protocol P --url URL [--session ID] TEXT...", stderr)
	proto := fs.String("protocol", translate.ProtoAgentAPI, "protocol to speak: agentapi, aip or agentprotocol (ap)")
	rawURL := fs.String("url", "http://127.0.0.1:9000", "the agent or bridge: a base URL, or the full endpoint URL")
	session := fs.String("session", "", "session id, to continue a conversation (default: a new one)")
	user := fs.String("user", "", "user id (default: the session id)")
	aipMode := fs.String("aip-mode", "auto", "with --protocol aip: stream, rpc, or auto (stream when the partner advertises it)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	text := strings.Join(fs.Args(), " ")
	if text == "" {
		return fmt.Errorf("%w: give the text to send", errUsage)
	}
	p, err := mapping.NormalizeProtocol(*proto)
	if err != nil {
		return fmt.Errorf("%w: --protocol: %w", errUsage, err)
	}
	agent, err := callAgent(p, *rawURL, aipMode)
	if err != nil {
		return err
	}
	if *session == "" {
		*session = upstream.NewSessionID()
	}
	req := &translate.Request{Command: translate.CommandStart, Session: *session, User: *user, Stream: true,
		Input: []translate.Message{{Role: translate.RoleUser, Parts: []translate.Part{translate.TextPart(text)}}}}
	stream, err := agent.Open(ctx, req)
	if err != nil {
		return err
	}
	defer stream.Close()
	pr := &printer{out: stdout, errOut: stderr, session: *session}
	for {
		ev, err := stream.Next()
		if errors.Is(err, io.EOF) {
			return pr.result()
		}
		if err != nil {
			return err
		}
		pr.event(ev)
	}
}

// callAgent returns the upstream client of protocol p for the agent or
// bridge at raw: the same client the bridge itself uses upstream, so what
// call prints is what the bridge would see.
func callAgent(p, raw string, aipMode *string) (translate.Agent, error) {
	switch p {
	case translate.ProtoAgentAPI:
		endpoint, err := endpointURL(raw, "/process")
		if err != nil {
			return nil, fmt.Errorf("%w: --url: %w", errUsage, err)
		}
		raw = endpoint
	}
	return newUpstream(upstream.Config{Name: "call", URL: raw, Protocol: p,
		Timeouts: upstream.Timeouts{FirstByte: time.Minute}, AIP: upstream.AIPOptions{Mode: *aipMode}})
}

// endpointURL returns raw when it has a path, else raw with path appended.
func endpointURL(raw, path string) (string, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return "", err
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return "", fmt.Errorf("%q is not an http(s) URL", raw)
	}
	if u.Path == "" || u.Path == "/" {
		u.Path = path
	}
	return u.String(), nil
}

// printer writes canonical events for a person: text as it streams, tools,
// artifacts and the outcome on lines of their own.
type printer struct {
	out, errOut io.Writer
	session     string
	streamed    map[string]bool // messages whose text was printed as deltas
	midLine     bool
	lastLine    string
	failure     error
}

func (p *printer) line(format string, args ...any) {
	if p.midLine {
		fmt.Fprintln(p.out)
		p.midLine = false
	}
	p.lastLine = fmt.Sprintf(format, args...)
	fmt.Fprintln(p.out, p.lastLine)
}

func (p *printer) event(ev *translate.Event) {
	if p.streamed == nil {
		p.streamed = map[string]bool{}
	}
	switch ev.Kind {
	case translate.KindContent:
		if ev.Part == nil || ev.Part.Kind != translate.PartText {
			return
		}
		if ev.Delta {
			p.streamed[ev.MessageID] = true
			fmt.Fprint(p.out, ev.Part.Text)
			p.midLine = true
		} else if ev.Done && !p.streamed[ev.MessageID] {
			p.streamed[ev.MessageID] = true
			p.line("%s", ev.Part.Text)
		}
	case translate.KindMessageEnd:
		if ev.Message != nil && !p.streamed[ev.MessageID] && ev.Message.Role == translate.RoleAssistant {
			if t := ev.Message.Text(); t != "" {
				p.streamed[ev.MessageID] = true
				p.line("%s", t)
			}
		}
		if p.midLine {
			fmt.Fprintln(p.out)
			p.midLine = false
		}
	case translate.KindToolCall:
		if ev.Done && ev.Tool != nil {
			p.line("[tool call] %s %s", ev.Tool.Name, ev.Tool.Arguments)
		}
	case translate.KindToolResult:
		if ev.Done && ev.Tool != nil {
			p.line("[tool result] %s: %s", ev.Tool.Name, ev.Tool.Output)
		}
	case translate.KindArtifact:
		if a := ev.Artifact; a != nil {
			for _, part := range a.Parts {
				p.line("[artifact] %s", strings.Join(nonEmpty(firstNonEmpty(part.Name, a.Name), part.MIME, firstNonEmpty(part.URI, part.Text)), " "))
			}
		}
	case translate.KindInputRequest:
		// The question usually came as an assistant message just before.
		if q := translate.PartsText(ev.Parts); q != p.lastLine {
			p.line("[input required] %s", q)
		} else {
			p.line("[input required]")
		}
		p.line("(continue with: bridge call --session %s TEXT)", p.session)
	case translate.KindError:
		if ev.Err != nil {
			p.failure = fmt.Errorf("%s: %s", ev.Err.Code, ev.Err.Message)
		}
	case translate.KindState:
		switch ev.State {
		case translate.StateFailed, translate.StateRejected, translate.StateCanceled:
			msg := string(ev.State)
			if ev.Err != nil {
				msg += ": " + ev.Err.Code + ": " + ev.Err.Message
			}
			p.failure = errors.New(msg)
		}
	}
}

func (p *printer) result() error {
	if p.midLine {
		fmt.Fprintln(p.out)
		p.midLine = false
	}
	return p.failure
}

func firstNonEmpty(s ...string) string {
	for _, v := range s {
		if v != "" {
			return v
		}
	}
	return ""
}

func nonEmpty(s ...string) []string {
	var out []string
	for _, v := range s {
		if v != "" {
			out = append(out, v)
		}
	}
	return out
}
