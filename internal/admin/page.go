package admin

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"html/template"
	"time"

	"github.com/valyala/fasthttp"
)

// pageData is what every page template gets.
type pageData struct {
	Title string
	Nonce string // the CSP nonce of this response's style and script
	Now   time.Time

	// index
	Upstreams []Upstream
	Exchanges []ExchangeSummary

	// exchange
	View  *ExchangeView
	Start time.Time // the first timeline entry's time, for offsets
}

var funcs = template.FuncMap{
	"clock": func(t time.Time) string {
		if t.IsZero() {
			return ""
		}
		return t.Local().Format("15:04:05.000")
	},
	"offset": func(start, t time.Time) string {
		if start.IsZero() || t.IsZero() {
			return ""
		}
		return "+" + t.Sub(start).Round(time.Microsecond).String()
	},
	"breakerClass": breakerClass,
	"eventJSON": func(v any) string {
		b, err := json.MarshalIndent(v, "", "  ")
		if err != nil {
			return err.Error()
		}
		return string(b)
	},
	"arrow": func(dir string) string {
		switch dir {
		case "down-in":
			return "client → bridge"
		case "down-out":
			return "bridge → client"
		case "up-out":
			return "bridge → agent"
		case "up-in":
			return "agent → bridge"
		}
		return dir
	},
}

// breakerClass is the CSS class of a breaker state; unknown states get
// their own so that nothing from outside becomes a class name.
func breakerClass(state string) string {
	switch state {
	case "closed", "half-open", "open":
		return "breaker-" + state
	}
	return "breaker-unknown"
}

var pages = template.Must(template.New("").Funcs(funcs).Parse(layoutHTML + indexHTML + exchangeHTML))

const layoutHTML = `{{define "head"}}<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{{.Title}} · agent bridge admin</title>
<style nonce="{{.Nonce}}">
body { font: 14px/1.4 system-ui, sans-serif; margin: 1.5em; color: #222; }
header a { margin-right: 1em; }
h1 { font-size: 1.3em; } h2 { font-size: 1.1em; margin-top: 1.5em; }
table { border-collapse: collapse; width: 100%; }
th, td { text-align: left; vertical-align: top; padding: .25em .5em; border-bottom: 1px solid #ddd; }
th { background: #f4f4f4; }
code, pre { font: 12px/1.35 ui-monospace, monospace; }
pre { white-space: pre-wrap; word-break: break-all; margin: .2em 0; max-height: 20em; overflow: auto; }
.breaker-closed { color: #17631a; } .breaker-half-open { color: #8a5a00; } .breaker-open { color: #a11; font-weight: bold; }
.breaker-unknown { color: #666; }
.muted { color: #666; }
.timeline td { width: 31%; } .timeline td.time { width: 7%; white-space: nowrap; }
.frame { background: #f7f7fb; border-left: 3px solid #99c; padding: .2em .4em; }
.event { background: #f5fbf5; border-left: 3px solid #6a6; padding: .2em .4em; }
.kind { font-weight: bold; } .dir { color: #555; font-size: 12px; }
</style>
</head>
<body>
<header><a href="/">bridge admin</a><a href="/metrics">metrics</a><a href="/api/config">config</a><a href="/api/upstreams">upstreams API</a><a href="/api/exchanges">exchanges API</a><a href="/readyz">readyz</a></header>
{{end}}
{{define "foot"}}</body></html>{{end}}
`

const indexHTML = `{{define "index"}}{{template "head" .}}
<h1>Agent bridge</h1>
<h2>Upstreams <span id="refreshed" class="muted"></span></h2>
<table id="upstreams">
<thead><tr><th>name</th><th>protocol</th><th>url</th><th>breaker</th><th>requests</th><th>failures</th><th>consecutive failures</th></tr></thead>
<tbody>
{{range .Upstreams}}<tr><td>{{.Name}}</td><td>{{.Protocol}}</td><td>{{.URL}}</td><td class="{{breakerClass .Breaker}}">{{.Breaker}}</td><td>{{.Counts.Requests}}</td><td>{{.Counts.TotalFailures}}</td><td>{{.Counts.ConsecutiveFailures}}</td></tr>
{{else}}<tr><td colspan="7" class="muted">no upstreams</td></tr>
{{end}}</tbody>
</table>
<h2>Recent exchanges <a href="/" class="muted">reload</a></h2>
<table id="exchanges">
<thead><tr><th>exchange</th><th>updated</th><th>client → agent</th><th>route</th><th>state</th><th>events</th><th>client id</th><th>session</th></tr></thead>
<tbody>
{{range .Exchanges}}<tr><td><a class="exchange-link" href="/exchanges/{{.ID}}">{{.ID}}</a></td><td>{{clock .Updated}}</td><td>{{.Downstream}} → {{.Upstream}}</td><td>{{.Route}}</td><td>{{.State}}</td><td>{{.Events}}</td><td>{{.ClientID}}</td><td>{{.Session}}</td></tr>
{{else}}<tr><td colspan="8" class="muted">no exchanges yet</td></tr>
{{end}}</tbody>
</table>
<script nonce="{{.Nonce}}">
(function () {
  "use strict";
  var known = {"closed": 1, "half-open": 1, "open": 1};
  var tbody = document.querySelector("#upstreams tbody");
  var note = document.getElementById("refreshed");
  function cell(tr, text, cls) {
    var td = document.createElement("td");
    td.textContent = String(text);
    if (cls) { td.className = cls; }
    tr.appendChild(td);
  }
  function refresh() {
    fetch("/api/upstreams", {cache: "no-store"}).then(function (r) {
      if (!r.ok) { throw new Error("HTTP " + r.status); }
      return r.json();
    }).then(function (ups) {
      var rows = ups.map(function (u) {
        var tr = document.createElement("tr");
        var c = u.counts || {};
        cell(tr, u.name); cell(tr, u.protocol); cell(tr, u.url);
        cell(tr, u.breaker, known[u.breaker] ? "breaker-" + u.breaker : "breaker-unknown");
        cell(tr, c.requests || 0); cell(tr, c.total_failures || 0); cell(tr, c.consecutive_failures || 0);
        return tr;
      });
      tbody.replaceChildren.apply(tbody, rows);
      note.textContent = "(live, updated " + new Date().toLocaleTimeString() + ")";
    }).catch(function (e) {
      note.textContent = "(refresh failed: " + e.message + ")";
    });
  }
  setInterval(refresh, 2000);
})();
</script>
{{template "foot" .}}{{end}}
`

const exchangeHTML = `{{define "exchange"}}{{template "head" .}}
{{with .View}}{{with .Exchange}}
<h1>Exchange <code id="exchange-id">{{.ID}}</code></h1>
<table class="summary">
<tr><th>state</th><td id="exchange-state">{{.State}}</td><th>client → agent</th><td>{{.Downstream}} → {{.Upstream}}</td><th>route</th><td>{{.Route}}</td></tr>
<tr><th>client id</th><td>{{.ClientID}}</td><th>session</th><td>{{.Session}}</td><th>user</th><td>{{.User}}</td></tr>
<tr><th>created</th><td>{{clock .Created}}</td><th>updated</th><td>{{clock .Updated}}</td><th>events</th><td>{{.LastSeq}}</td></tr>
</table>
{{if .History}}<h2>Conversation</h2>
<table class="history">{{range .History}}<tr><th>{{.Role}}</th><td><pre>{{.Text}}</pre></td></tr>{{end}}</table>{{end}}
{{end}}
<h2>Timeline</h2>
{{if .EventsDropped}}<p class="muted">Older events were dropped; the latest are shown.</p>{{end}}
<table class="timeline" id="timeline">
<thead><tr><th>time</th><th>downstream frames</th><th>canonical events</th><th>upstream frames</th></tr></thead>
<tbody>
{{$start := $.Start}}{{range .Timeline}}<tr class="lane-{{.Lane}}"><td class="time" title="{{clock .Time}}">{{offset $start .Time}}</td>
{{if eq .Lane "downstream"}}<td class="frame"><div class="dir">{{arrow .Dir}} #{{.Seq}}{{if .Truncated}} (cut){{end}}</div><pre>{{.Text}}</pre></td><td></td><td></td>
{{else if eq .Lane "canonical"}}<td></td><td class="event"><span class="seq">#{{.Seq}}</span> <span class="kind">{{.Kind}}</span> <span class="summary">{{.Text}}</span>{{if .Event}}<details><summary class="muted">event</summary><pre>{{eventJSON .Event}}</pre></details>{{end}}</td><td></td>
{{else}}<td></td><td></td><td class="frame"><div class="dir">{{arrow .Dir}} #{{.Seq}}{{if .Truncated}} (cut){{end}}</div><pre>{{.Text}}</pre></td>
{{end}}</tr>
{{else}}<tr><td colspan="4" class="muted">nothing recorded</td></tr>
{{end}}</tbody>
</table>
{{end}}
{{template "foot" .}}{{end}}
{{define "notfound"}}{{template "head" .}}
<h1>No such exchange</h1>
<p>It may have expired from the exchange log. <a href="/">Back to the list</a>.</p>
{{template "foot" .}}{{end}}
`

// nonce returns a fresh value for the Content-Security-Policy nonce.
func nonce() string {
	var b [16]byte
	rand.Read(b[:]) // never fails (crypto/rand, Go 1.24+)
	return base64.StdEncoding.EncodeToString(b[:])
}

// render executes page name with d and answers with it.
func (s *Server) render(ctx *fasthttp.RequestCtx, status int, name string, d *pageData) {
	d.Nonce = nonce()
	d.Now = time.Now()
	var buf bytes.Buffer
	if err := pages.ExecuteTemplate(&buf, name, d); err != nil {
		s.opts.Logger.Error("admin: rendering a page", "page", name, "error", err)
		ctx.SetStatusCode(fasthttp.StatusInternalServerError)
		ctx.SetContentType("text/plain; charset=utf-8")
		ctx.SetBodyString("rendering the page failed\n")
		return
	}
	h := &ctx.Response.Header
	h.Set("Content-Security-Policy", "default-src 'none'; connect-src 'self'; img-src 'self'; "+
		"style-src 'nonce-"+d.Nonce+"'; script-src 'nonce-"+d.Nonce+"'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Referrer-Policy", "no-referrer")
	ctx.SetStatusCode(status)
	ctx.SetContentType("text/html; charset=utf-8")
	ctx.SetBody(buf.Bytes())
}

func (s *Server) pageIndex(ctx *fasthttp.RequestCtx) {
	s.render(ctx, fasthttp.StatusOK, "index", &pageData{Title: "overview", Upstreams: s.upstreams(),
		Exchanges: s.recent(DefaultListLimit)})
}

func (s *Server) pageExchange(ctx *fasthttp.RequestCtx, id string) {
	v, status := s.exchangeView(id)
	if v == nil {
		s.render(ctx, status, "notfound", &pageData{Title: "no such exchange"})
		return
	}
	d := &pageData{Title: "exchange " + id, View: v}
	if len(v.Timeline) > 0 {
		d.Start = v.Timeline[0].Time
	}
	s.render(ctx, fasthttp.StatusOK, "exchange", d)
}
