package main

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// host is what the harness knows about where it runs its processes.
type host struct {
	self    string // this binary, re-executed for the roles
	tmp     string // scratch dir: logs, nginx prefix
	taskset string // path of taskset, "" when not pinning
}

// Core assignment: the load generator and the agent on one core, the
// proxy under test on the other.
const (
	coreLoad  = 0
	coreProxy = 1
)

// proc is one started server.
type proc struct {
	name string
	cmd  *exec.Cmd
	addr string // host:port it serves on
	log  string // its stderr
	done chan struct{}
}

// Pid is the process id (the same under taskset, which execs).
func (p *proc) Pid() int { return p.cmd.Process.Pid }

// command builds argv, under taskset -c core when pinning.
func (h *host) command(core int, argv ...string) *exec.Cmd {
	if h.taskset != "" {
		argv = append([]string{h.taskset, "-c", strconv.Itoa(core)}, argv...)
	}
	return exec.Command(argv[0], argv[1:]...)
}

// startRole starts this binary in a role and waits for its "ready ADDR".
func (h *host) startRole(name string, core int, args ...string) (*proc, error) {
	cmd := h.command(core, append([]string{h.self}, args...)...)
	logPath := filepath.Join(h.tmp, name+".log")
	lf, err := os.Create(logPath)
	if err != nil {
		return nil, fmt.Errorf("%s: log: %w", name, err)
	}
	cmd.Stderr = lf
	out, err := cmd.StdoutPipe()
	if err != nil {
		lf.Close()
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	if err := cmd.Start(); err != nil {
		lf.Close()
		return nil, fmt.Errorf("%s: start: %w", name, err)
	}
	p := &proc{name: name, cmd: cmd, log: logPath, done: make(chan struct{})}
	go func() { _ = cmd.Wait(); lf.Close(); close(p.done) }()
	ready := make(chan string, 1)
	go func() {
		br := bufio.NewReader(out)
		line, _ := br.ReadString('\n')
		ready <- strings.TrimSpace(line)
		_, _ = io.Copy(io.Discard, br)
	}()
	select {
	case line := <-ready:
		addr, ok := strings.CutPrefix(line, "ready ")
		if !ok {
			p.stop()
			return nil, fmt.Errorf("%s: did not start (%q); see %s: %s", name, line, logPath, tail(logPath))
		}
		p.addr = addr
		return p, nil
	case <-time.After(15 * time.Second):
		p.stop()
		return nil, fmt.Errorf("%s: not ready after 15s; see %s", name, logPath)
	}
}

// startExternal starts another program and waits until GET url answers 200.
func (h *host) startExternal(name string, core int, health string, argv ...string) (*proc, error) {
	cmd := h.command(core, argv...)
	logPath := filepath.Join(h.tmp, name+".log")
	lf, err := os.Create(logPath)
	if err != nil {
		return nil, fmt.Errorf("%s: log: %w", name, err)
	}
	cmd.Stdout, cmd.Stderr = lf, lf
	if err := cmd.Start(); err != nil {
		lf.Close()
		return nil, fmt.Errorf("%s: start: %w", name, err)
	}
	p := &proc{name: name, cmd: cmd, log: logPath, done: make(chan struct{})}
	go func() { _ = cmd.Wait(); lf.Close(); close(p.done) }()
	if err := waitHealthy(health, 10*time.Second, p.done); err != nil {
		p.stop()
		return nil, fmt.Errorf("%s: %w; see %s: %s", name, err, logPath, tail(logPath))
	}
	return p, nil
}

// waitHealthy polls url until it answers 200, the process dies, or limit passes.
func waitHealthy(url string, limit time.Duration, died <-chan struct{}) error {
	c := &http.Client{Timeout: time.Second}
	end := time.Now().Add(limit)
	for {
		resp, err := c.Get(url)
		if err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			err = fmt.Errorf("GET %s: status %d", url, resp.StatusCode)
		}
		if time.Now().After(end) {
			return fmt.Errorf("not healthy after %v: %w", limit, err)
		}
		select {
		case <-died:
			return fmt.Errorf("exited before it was healthy")
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// stop sends SIGTERM, then SIGKILL after 3s.
func (p *proc) stop() {
	if p == nil {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(3 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

// freePort returns a loopback address whose port was free a moment ago
// (for nginx, which cannot report the port it bound).
func freePort() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("free port: %w", err)
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

// tail returns the last lines of a log, for error messages.
func tail(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	s := strings.TrimSpace(string(b))
	if len(s) > 600 {
		s = "…" + s[len(s)-600:]
	}
	return s
}
