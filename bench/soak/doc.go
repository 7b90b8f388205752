// Command soak runs many concurrent streams through the bridge, with random
// faults injected between the bridge and its upstream agents, for a given
// time, and reports what came through.
//
//	go run ./bench/soak --duration 30s --concurrency 32 --fault-rate 0.2
//
// Everything runs in this process on loopback: the reference agent in each
// upstream protocol, a fault proxy in front of each, and the bridge with
// one route per upstream. Clients speak the Agent API to the bridge. For
// each exchange the soak knows the reply the agent gives, so it can count
// events lost: a stream that the bridge reported complete but whose text
// differs from the agent's. Where the upstream can resume (AIP re-stream),
// cut streams must still complete whole, so lost must be 0 there.
package main
