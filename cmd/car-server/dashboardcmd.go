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
)

const dashboardUsage = `usage: car-server dashboard [--open] [daemon flags: --home, --port, --bind, --config, …]

Prints the dashboard's link, http://127.0.0.1:PORT/ui/#host_token=…, and exits;
--open also opens it in the default browser. It reads the daemon's settings
(the same flags, environment and config file) and its host token: the host_token
setting when set (--host-token, $CAR_HOST_TOKEN or the config file), else the
host-token file the running daemon wrote. The token is in the fragment, which
the browser never sends to a server.`

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
	if cfg.Port == 0 {
		fmt.Fprintln(stderr, "car-server dashboard: the port is 0 (picked at start): pass the daemon's actual --port, from its log")
		return exitUsage
	}
	token, err := dashboardToken(cfg)
	if err != nil {
		fmt.Fprintln(stderr, "car-server dashboard:", err)
		return exitUnreachable
	}
	url := dashboardURL(cfg.Bind, cfg.Port, token)
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

// dashboardURL points at the daemon's TCP listener: loopback when it listens
// on every address.
func dashboardURL(bind string, port int, token string) string {
	host := bind
	if ip := net.ParseIP(bind); bind == "" || ip != nil && ip.IsUnspecified() {
		host = "127.0.0.1"
	}
	return "http://" + net.JoinHostPort(host, strconv.Itoa(port)) + "/ui/#host_token=" + token
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
