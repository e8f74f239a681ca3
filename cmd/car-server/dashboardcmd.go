package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"os/exec"
	"runtime"
	"strconv"
	"time"

	"github.com/parslee-ai/car-server/config"
	"github.com/parslee-ai/car-server/protocol"
)

const dashboardUsage = `usage: car-server dashboard [--open] [daemon flags: --home, --port, --bind, --config, …]

Prints the dashboard's link, http://127.0.0.1:PORT/ui/#host_token=…, and exits;
--open also opens it in the default browser. It asks the running daemon of the
state root (over its Unix socket) for the address it listens on; with no
daemon answering it uses the port setting and says so. It reads the daemon's
settings (the same flags, environment and config file) and its host token: the
host_token setting when set (--host-token, $CAR_HOST_TOKEN or the config file),
else the host-token file the running daemon wrote. The token is in the
fragment, which the browser never sends to a server.`

// runDashboardCommand prints (and with --open opens) the dashboard's link.
func runDashboardCommand(args []string, stdout, stderr io.Writer) int {
	open := false
	rest := make([]string, 0, len(args))
	for _, a := range args {
		switch a {
		case "--open":
			open = true
		case "-h", "--help":
			fmt.Fprintln(stdout, dashboardUsage)
			return exitOK
		default:
			rest = append(rest, a)
		}
	}
	cfg, code := loadConfig(command{name: "car-server dashboard", help: dashboardUsage, faultHelp: dashboardUsage}, rest, stdout, stderr)
	if cfg == nil {
		return code
	}
	bind, port := cfg.Bind, strconv.Itoa(cfg.Port)
	if addr, err := runningAddr(cfg); err == nil {
		bind, port, _ = net.SplitHostPort(addr)
	} else if cfg.Port == 0 {
		fmt.Fprintf(stderr, "car-server dashboard: no running daemon answers on %s, and the port is 0 (picked at start): pass the daemon's --home, or its actual --port from its log\n", cfg.Socket)
		return exitUnreachable
	} else {
		fmt.Fprintf(stderr, "car-server dashboard: no running daemon answers on %s; this link uses the port setting (%s): if the daemon runs elsewhere, pass its --home (or its --port)\n", cfg.Socket, port)
	}
	token, err := dashboardToken(cfg)
	if err != nil {
		fmt.Fprintln(stderr, "car-server dashboard:", err)
		return exitUnreachable
	}
	url := dashboardURL(bind, port, token)
	fmt.Fprintln(stdout, url)
	if open {
		if err := openBrowser(url); err != nil {
			fmt.Fprintf(stderr, "car-server dashboard: could not open a browser (%v); open the link above yourself\n", err)
			return exitFailed
		}
	}
	return exitOK
}

// dashboardToken is the pinned host token, else the one the daemon wrote.
func dashboardToken(cfg *config.Config) (string, error) {
	if cfg.HostToken != "" {
		return cfg.HostToken, nil
	}
	return readTokenFile(cfg.HostTokenPath)
}

// runningAddr asks the daemon on cfg's socket for the TCP address it
// listens on.
func runningAddr(cfg *config.Config) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, _ := dialDaemon(ctx, cfg, io.Discard)
	if c == nil {
		return "", fmt.Errorf("no daemon answers on %s", cfg.Socket)
	}
	defer c.Close()
	var st protocol.ServerStatusResult
	if err := c.Call(ctx, protocol.MethodServerStatus, nil, &st); err != nil {
		return "", err
	}
	if len(st.Listen) == 0 {
		return "", fmt.Errorf("the daemon on %s listens on no TCP address", cfg.Socket)
	}
	return st.Listen[0], nil
}

// dashboardURL points at the daemon's TCP listener: loopback when it listens
// on every address.
func dashboardURL(bind, port, token string) string {
	host := bind
	if ip := net.ParseIP(bind); bind == "" || ip != nil && ip.IsUnspecified() {
		host = "127.0.0.1"
	}
	return "http://" + net.JoinHostPort(host, port) + "/ui/#host_token=" + token
}

// openBrowser hands url to the platform's opener and waits for it.
func openBrowser(url string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var cmd *exec.Cmd
	switch runtime.GOOS {
	case "darwin":
		cmd = exec.CommandContext(ctx, "open", url)
	case "windows":
		cmd = exec.CommandContext(ctx, "rundll32", "url.dll,FileProtocolHandler", url)
	default:
		cmd = exec.CommandContext(ctx, "xdg-open", url)
	}
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%s: %w", cmd.Path, err)
	}
	return nil
}
