// Package load is the benchmark's load generator: a fasthttp client that
// drives an Agent API endpoint (POST /process, answered by SSE) on loopback
// only, in two modes.
//
// Open loop (RunOpen) sends at a fixed offered rate. Request i is due at
// start + i/rate whatever happened to the requests before it, and its
// latency is measured from that intended send time, not from when it was
// actually sent: a stall of the system under test therefore shows up in
// the latency of every request that should have been sent during it
// (the "coordinated omission" correction).
//
// Closed loop (RunClosed) keeps N requests in flight on N connections, each
// sent as soon as the previous one on its connection finished: the
// saturation throughput.
//
// Both record, per request, the total time (to the terminal
// object:"response" frame) and the time to the first SSE event into
// Histogram, a log-linear histogram with under 1% relative error, and count
// events, bytes and errors. Both are bounded by a duration and a request
// count and stop by themselves.
package load
