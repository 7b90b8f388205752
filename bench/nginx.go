package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

const nginxInstall = "nginx is not installed: install it with `apt-get install -y nginx` (Debian package nginx) to run the nginx scenarios"

// nginxMissing says why the nginx scenarios cannot run, or "".
func nginxMissing() string {
	if _, err := exec.LookPath("nginx"); err != nil {
		return nginxInstall
	}
	return ""
}

// nginxVersion is `nginx -v`'s answer, for the report.
func nginxVersion() string {
	out, err := exec.Command("nginx", "-v").CombinedOutput()
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(out))
}

// nginxConf is the comparison config: one worker (it has one core), access
// log off, proxy_buffering off so events pass as they come, HTTP/1.1 with a
// keepalive pool to the agent, bodies buffered in memory (16 KB requests
// fit in client_body_buffer_size, so nothing touches the disk).
const nginxConf = `%s
worker_processes 1;
daemon off;
master_process on;
pid %[2]s/nginx.pid;
error_log %[2]s/error.log warn;
events { worker_connections 8192; }
http {
    access_log off;
    client_body_temp_path %[2]s/client_body;
    proxy_temp_path %[2]s/proxy;
    fastcgi_temp_path %[2]s/fastcgi;
    uwsgi_temp_path %[2]s/uwsgi;
    scgi_temp_path %[2]s/scgi;
    client_max_body_size 8m;
    client_body_buffer_size 64k;
    keepalive_requests 1000000;
    upstream agent {
        server %[3]s;
        keepalive 256;
        keepalive_requests 1000000;
    }
    server {
        listen %[4]s;
        location / {
            proxy_pass http://agent;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_buffering off;
            proxy_read_timeout 60s;
        }
    }
}
`

// startNginx writes the config to a temp prefix and runs nginx there in the
// foreground, as root with "user root;" when the harness is root.
func startNginx(h *host, agent *proc) (*front, error) {
	bin, err := exec.LookPath("nginx")
	if err != nil {
		return nil, fmt.Errorf("%s: %w", nginxInstall, err)
	}
	dir := filepath.Join(h.tmp, "nginx")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("nginx prefix: %w", err)
	}
	listen, err := freePort()
	if err != nil {
		return nil, err
	}
	user := ""
	if os.Geteuid() == 0 {
		user = "user root;"
	}
	conf := filepath.Join(dir, "nginx.conf")
	if err := os.WriteFile(conf, fmt.Appendf(nil, nginxConf, user, dir, agent.addr, listen), 0o644); err != nil {
		return nil, fmt.Errorf("nginx config: %w", err)
	}
	p, err := h.startExternal("nginx", coreProxy, "http://"+listen+"/health",
		bin, "-p", dir, "-c", conf, "-e", filepath.Join(dir, "error.log"))
	if err != nil {
		return nil, err
	}
	p.addr = listen
	return &front{base: "http://" + listen, proc: p}, nil
}
