package main

import (
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"time"
)

// newRevProxy is the standard-library comparison: httputil.ReverseProxy
// flushing every write (FlushInterval -1, as SSE needs), with a transport
// that keeps enough idle connections to the agent for the load (the
// default of 2 per host would make it dial on almost every request).
func newRevProxy(target *url.URL) http.Handler {
	tr := &http.Transport{
		DialContext:         (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConns:        1024,
		MaxIdleConnsPerHost: 1024,
		IdleConnTimeout:     90 * time.Second,
		DisableCompression:  true,
	}
	return &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			r.SetURL(target)
			r.Out.Host = r.In.Host
		},
		FlushInterval: -1,
		Transport:     tr,
	}
}
