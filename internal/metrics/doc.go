// Package metrics counts the bridge's work for Prometheus.
//
// A Metrics keeps its collectors on its own prometheus.Registry, never the
// global one, so that two bridges in one process (tests, the demo) do not
// collide; Handler serves that registry. It is a downstream.Observer: give
// it to downstream.Options.Observer and it counts requests, exchanges,
// events, latency and time to first event, labelled by downstream protocol,
// upstream protocol, route and outcome. What the server does not see is fed
// by the caller: breaker transitions through BreakerChanged (wire it to
// upstream.Config.OnBreakerChange), retries and resumes through Retried and
// Resumed. Breaker states and the exchange store's size are read at scrape
// time from the funcs in Options.
//
// Series (all prefixed bridge_):
//
//	requests_total{downstream,upstream,route,outcome}       every request answered: exchange turns, and rejections (outcome http_<status>)
//	exchanges_total{downstream,upstream,route,outcome}      exchange turns ended
//	exchange_duration_seconds{downstream,upstream,route}    histogram of exchange turn durations
//	time_to_first_event_seconds{downstream,upstream,route}  histogram of the wait for a turn's first event
//	events_forwarded_total{downstream,upstream,route,kind}  canonical events, by kind
//	active_streams{downstream,upstream,route}               exchange turns in flight
//	errors_total{downstream,code}                           errors by protocol error code; rejections as HTTP_<status>
//	upstream_breaker_state{upstream}                        0 closed, 1 half-open, 2 open
//	upstream_breaker_transitions_total{upstream,from,to}    breaker state changes
//	upstream_retries_total{upstream}                        calls the upstream clients retried
//	resumes_total{side,protocol}                            streams resumed after a cut (side upstream or downstream)
//	exchange_store_size                                     exchanges held by the store
//
// Label values that come from outside (outcomes and error codes, which an
// agent may choose) are bounded: past MaxLabelValues distinct values the
// rest are counted as "other", so a misbehaving agent cannot grow the
// registry without bound.
package metrics
