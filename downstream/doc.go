// Package downstream is the bridge's listener: one fasthttp server that
// accepts every enabled protocol on one port, tells them apart per request
// by path and body, turns each request into a canonical translate.Request,
// hands it to the upstream agent its route names, and pumps the agent's
// canonical events back in the caller's protocol.
//
// Lifetime rules, which fasthttp makes easy to break:
//   - nothing here touches a *fasthttp.RequestCtx after its handler returns,
//     including inside SetBodyStreamWriter: what a stream needs is copied
//     first;
//   - every exchange gets its own context, cancelled when the client goes
//     away (seen at once by a disconnect watch, or at the next failed write)
//     or when the stream ends, so no upstream call outlives its client;
//   - one event is in flight per stream: the upstream is not read again
//     until the previous event was written and flushed, so a slow client
//     slows its upstream and memory stays bounded.
package downstream
