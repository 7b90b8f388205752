// Package plugins holds hooks that see canonical requests and events on
// their way between client and agent, compiled in and enabled by config.
//
// A plugin is a Hooks value: plain func fields, nil meaning "nothing to
// do". Wrap puts hooks around any translate.Agent (an upstream client), so
// they apply to every protocol path without the listener knowing them.
// Hooks run on the exchange's goroutine, in order, and must be quick.
//
// Built in: Redact, which masks text matching regular expressions in what
// the client sends and what the agent answers (cards, keys, e-mails).
package plugins
