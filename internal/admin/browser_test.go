package admin_test

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// chromium returns the path of a Chromium or Chrome binary on PATH, or "".
func chromium() string {
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	return ""
}

// TestBrowserAdminPage loads the admin page in a real headless Chromium,
// sees the upstream table refresh itself, follows the link to an exchange
// and finds its events. It skips when no browser is installed, unless
// BRIDGE_REQUIRE_BROWSER=1 (CI: .ci/browser.sh installs Debian's chromium).
func TestBrowserAdminPage(t *testing.T) {
	bin := chromium()
	if bin == "" {
		if os.Getenv("BRIDGE_REQUIRE_BROWSER") == "1" {
			t.Fatal("BRIDGE_REQUIRE_BROWSER=1 but no chromium, chromium-browser or google-chrome on PATH (apt-get install chromium)")
		}
		t.Skip("no chromium, chromium-browser or google-chrome on PATH: skipping the browser test (apt-get install chromium; BRIDGE_REQUIRE_BROWSER=1 makes this a failure)")
	}

	r := newRig(t)
	r.send(t, "hello browser [tool]")
	r.settle(t, 1)
	xs := r.store.List(0)
	if len(xs) != 1 {
		t.Fatalf("%d exchanges, want 1", len(xs))
	}
	id := xs[0].ID

	actx, cancel := chromedp.NewExecAllocator(context.Background(),
		chromedp.ExecPath(bin),
		chromedp.Flag("headless", true),
		chromedp.Flag("no-sandbox", true),
		chromedp.Flag("disable-gpu", true),
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("no-first-run", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.UserDataDir(t.TempDir()),
	)
	defer cancel()
	ctx, cancel := chromedp.NewContext(actx)
	defer cancel()
	ctx, cancel = context.WithTimeout(ctx, 60*time.Second)
	defer cancel()

	// Each step is checked in turn so that a failure names it.
	step := func(what string, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("browser: %s: %v", what, err)
		}
	}
	text := func(sel string) string {
		t.Helper()
		s, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(sel)))
		step("read "+sel, err)
		return s
	}
	step("load the page", chromedp.Do(ctx,
		chromedp.Navigate(r.admin+"/"),
		chromedp.WaitVisible(chromedp.CSS(`#upstreams tbody tr`))))
	// The inline script (allowed by the page's CSP nonce) refreshes the
	// upstream table every 2s.
	_, err := chromedp.Run(ctx, chromedp.Poll[bool](`document.getElementById("refreshed").textContent.includes("live")`,
		chromedp.WithPollingTimeout(10*time.Second)))
	step("wait for the live refresh of the upstream table", err)
	upstreams := text(`#upstreams`)
	step("follow the exchange link", chromedp.Do(ctx,
		chromedp.Click(chromedp.CSS(`a.exchange-link`)),
		chromedp.WaitVisible(chromedp.ID(`timeline`))))
	location, err := chromedp.Run(ctx, chromedp.Location())
	step("read the location", err)
	header := text(`#exchange-id`)
	timeline := text(`#timeline`)

	for _, want := range []string{"reference", "agentapi", "closed"} {
		if !strings.Contains(upstreams, want) {
			t.Errorf("upstream table lacks %q: %s", want, upstreams)
		}
	}
	if !strings.HasSuffix(location, "/exchanges/"+id) || header != id {
		t.Errorf("followed the link to %s (header %q), want the exchange %s", location, header, id)
	}
	for _, want := range []string{
		"echo:", "hello browser [tool]", // the reply and the request
		"state", "working", "tool_call", "get_weather", "tool_result", "message_start", "content", "message_end", "usage", "completed",
		"client → bridge", "bridge → agent", "agent → bridge", "bridge → client", // frames of every direction
	} {
		if !strings.Contains(timeline, want) {
			t.Errorf("the exchange's timeline does not show %q", want)
		}
	}
	if t.Failed() {
		t.Logf("timeline as shown:\n%s", timeline)
	}
}
