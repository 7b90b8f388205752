// Package refagent is the reference agent: one behaviour, expressed as
// canonical events, that the bridge serves in every protocol so that each
// path can be checked end to end.
//
// Given the user's text T it answers "echo: T" as at least three text
// deltas, and reacts to markers in T:
//
//	[tool]  a get_weather call with {"city":"Beijing"} and its result "sunny" first
//	[ask]   asks for input ("need more input"); the next input U in the same
//	        session is answered "echo: U"
//	[file]  also produces the artifact report.txt (text/plain,
//	        https://example.com/report.txt)
//	[fail]  fails with AGENT_FAILED "failed on request"
//	[slow]  waits 200 ms between events
//
// The agent is a translate.Agent, so the same code backs `bridge agent` for
// every protocol: the protocol's downstream server fronts it in-process.
package refagent
