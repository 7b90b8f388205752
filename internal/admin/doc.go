// Package admin is the bridge's admin listener: metrics, health, the
// effective config, upstreams with their breakers, and the exchanges the
// bridge handled, as a JSON API and as a small server-rendered web page.
//
// Endpoints (all GET or HEAD):
//
//	/metrics               Prometheus metrics (Options.Metrics)
//	/healthz               200 while the process runs
//	/readyz                200 when ready, 503 while draining (Options.Ready)
//	/api/config            the effective config as JSON, secrets redacted
//	/api/upstreams         each upstream: name, protocol, url, breaker state and counts
//	/api/exchanges         recent exchanges, the most recently updated first (?limit=N)
//	/api/exchanges/{id}    one exchange: the exchange, its canonical events, its raw
//	                       frames, and both merged into one timeline by time
//	/                      the page: upstreams (refreshed every 2s) and recent exchanges
//	/exchanges/{id}        one exchange as a timeline in three columns: downstream
//	                       frames, canonical events, upstream frames
//
// The page is rendered with html/template and needs no build step; its only
// script refreshes the upstream table. Frames and events are untrusted (they
// come from clients and agents) and are always escaped: the templates do it
// for HTML, the script sets textContent only, and a Content-Security-Policy
// with a per-response nonce allows no other script.
//
// The admin listener is for operators: it shows request and reply content.
// Bind it to loopback or a private network. Nothing on it changes state.
package admin
